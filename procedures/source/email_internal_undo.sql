-- Internal: undo what this call wrote after an error, and nothing the caller wrote before it (a
-- deadlock's 1305 on the savepoint is swallowed, so the caller sees the 1213).
CREATE PROCEDURE email_internal_undo(
  IN p_own INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  {{>unit_undo | own = p_own}}
END
