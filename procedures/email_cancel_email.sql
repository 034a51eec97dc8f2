-- Cancel one email by its outbox id (attempt id), whichever account enqueued it: the operator's
-- `email-outbox cancel` and the console's cancel action. Same rule as email_cancel: a Pending or
-- Retrying row, or a reservation whose send has not started, ends Failed with last_error_code
-- 'Cancelled', audited with who and why, and is never handed to SES; the row lock orders it against
-- the worker's start mark, so a row is cancelled or sent, never both. The operator and console roles
-- may call it; the enqueuer role may not (a service cancels only its own emails, with email_cancel).
-- Result: affected (1 cancelled; 0 when a send may be in flight or done, the row is terminal, or there
-- is no such row), attempt_id (NULL: no such row), from_status (the status it was cancelled from).
CREATE PROCEDURE email_cancel_email(
  IN p_id BIGINT UNSIGNED,
  IN p_cancelled_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  IF p_id IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_cancel_email: id is required';
  END IF;
  CALL email_internal_cancel('email_cancel_email', p_id, p_cancelled_by, p_reason);
END
