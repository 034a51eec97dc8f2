-- Internal: undo what this call wrote after an error, and nothing the caller wrote before it. A
-- deadlock has already rolled back the caller's whole transaction, savepoint included: the 1305
-- that ROLLBACK TO SAVEPOINT then raises is expected and swallowed, so the caller sees the 1213.
CREATE PROCEDURE email_internal_undo(
  IN p_own INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
  IF p_own = 1 THEN
    ROLLBACK;
  ELSEIF p_own = 0 THEN
    ROLLBACK TO SAVEPOINT email_outbox_call;
  END IF;
END
