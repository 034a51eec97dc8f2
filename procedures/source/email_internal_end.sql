-- Internal: close what email_internal_begin opened: commit our own transaction, or leave the caller's
-- open (the savepoint goes with it).
CREATE PROCEDURE email_internal_end(
  IN p_own INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  {{>unit_end | own = p_own}}
END
