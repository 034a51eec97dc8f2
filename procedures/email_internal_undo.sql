-- Internal: undo what this call wrote after an error, and nothing the caller wrote before it (a
-- deadlock's 1305 on the savepoint is swallowed, so the caller sees the 1213).
CREATE PROCEDURE email_internal_undo(
  IN p_own INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
    IF p_own = 1 THEN
      ROLLBACK;
    ELSEIF p_own = 0 THEN
      ROLLBACK TO SAVEPOINT email_outbox_call;
    END IF;
  END;
END
