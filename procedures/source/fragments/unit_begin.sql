-- Open the unit of work that makes a transition and its audit event commit together.
-- Outside a transaction (autocommit, how the worker calls): starts one, and {{own}} = 1, so unit_end
-- commits it. Inside the caller's own transaction: never commits or rolls back the caller's work; sets
-- a savepoint instead ({{own}} = 0), so a failure undoes this call only (unit_undo).
-- SET TRANSACTION fails with 1568 inside an open transaction on MariaDB and MySQL alike: that is how
-- the two cases are told apart without SUPER, a stored function or a server-specific variable.
--   own  the INT variable that remembers which (the exit handler's unit_undo reads it)
BEGIN
  DECLARE CONTINUE HANDLER FOR 1568 SET {{own}} = 0;
  SET {{own}} = 1;
  SET TRANSACTION READ WRITE;
END;
IF {{own}} = 1 THEN
  START TRANSACTION;
ELSE
  SAVEPOINT email_outbox_call;
END IF;
