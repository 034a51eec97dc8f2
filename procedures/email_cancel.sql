-- Cancel an email that has not been handed to SES: a Pending or Retrying row, or one claimed as a
-- reservation whose send has not started, ends Failed with last_error_code 'Cancelled', audited with
-- who and why, and is never sent (the worker's start mark of that reservation then finds nothing).
-- The row lock orders a cancel against the worker's start: a row is either cancelled and never
-- sent, or not cancelled; never both. The enqueuer, operator and console roles may call it.
-- Result: affected (1 cancelled; 0 when a send may be in flight or done: a started claim, Sent,
-- UnknownOutcome; when the row is already Failed; or when no row has that notification_id),
-- attempt_id (NULL: no such notification_id), from_status (the status it was cancelled from).
CREATE PROCEDURE email_cancel(
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  IN p_cancelled_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_notification_id IS NULL OR CHAR_LENGTH(p_notification_id) < 1 OR CHAR_LENGTH(p_notification_id) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_cancel: notification_id must be 1 to 191 characters';
  END IF;
  CALL email_internal_check_name('email_cancel', 'cancelled_by', p_cancelled_by, 191);
  CALL email_internal_check_name('email_cancel', 'reason', p_reason, 2000);
  CALL email_internal_begin(v_own);
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_id = NULL;
    -- Notification ids are per enqueuing account: the caller's own row first, then a legacy one,
    -- then another account's (an operator's or the console's cancel).
    SELECT id INTO v_id FROM email_delivery_attempts
     WHERE notification_id = p_notification_id COLLATE utf8mb4_bin
     ORDER BY account = SUBSTRING_INDEX(SESSION_USER(), '@', 1) DESC, account = '' DESC, id
     LIMIT 1;
  END;
  IF v_id IS NOT NULL THEN
    CALL email_internal_end_unsent(v_id, v_now, 'Cancelled', CONCAT('cancelled: ', p_reason), p_cancelled_by, 0, v_from);
  END IF;
  CALL email_internal_end(v_own);
  SELECT IF(v_from IS NULL, 0, 1) AS affected, v_id AS attempt_id, v_from AS from_status;
END
