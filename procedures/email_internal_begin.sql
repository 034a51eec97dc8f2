-- Internal: open the unit of work that makes a transition and its audit event commit together.
-- Outside a transaction (autocommit, how the worker calls): starts one, and p_own = 1, so the caller
-- commits it with email_internal_end. Inside the caller's own transaction: never commits or rolls
-- back the caller's work; sets a savepoint instead (p_own = 0), so a failure undoes this call only.
-- SET TRANSACTION fails with 1568 inside an open transaction on MariaDB and MySQL alike: that is how
-- the two cases are told apart without SUPER, a stored function or a server-specific variable.
CREATE PROCEDURE email_internal_begin(
  OUT p_own INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE CONTINUE HANDLER FOR 1568 SET p_own = 0;
  SET p_own = 1;
  SET TRANSACTION READ WRITE;
  IF p_own = 1 THEN
    START TRANSACTION;
  ELSE
    SAVEPOINT email_outbox_call;
  END IF;
END
