-- Undo what this call wrote after an error, and nothing the caller wrote before it. A deadlock has
-- already rolled back the caller's whole transaction, savepoint included: the 1305 that ROLLBACK TO
-- SAVEPOINT then raises is expected and swallowed, so the caller sees the 1213. {{own}} NULL: no unit
-- was opened yet, nothing to undo.
BEGIN
  DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
  IF {{own}} = 1 THEN
    ROLLBACK;
  ELSEIF {{own}} = 0 THEN
    ROLLBACK TO SAVEPOINT email_outbox_call;
  END IF;
END;
