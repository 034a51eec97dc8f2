-- Internal: close what email_internal_begin opened: commit our own transaction, or leave the caller's
-- open (the savepoint goes with it).
CREATE PROCEDURE email_internal_end(
  IN p_own INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  IF p_own = 1 THEN
    COMMIT;
  END IF;
END
