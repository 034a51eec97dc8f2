-- Cancel an email that has not been handed to SES, by the notification id the calling service gave
-- it: a Pending or Retrying row, or one claimed as a reservation whose send has not started, ends
-- Failed with last_error_code 'Cancelled', audited with who and why, and is never sent (the worker's
-- start mark of that reservation then finds nothing). Notification ids are per enqueuing account, so
-- a service cancels only its own emails: the row the calling account enqueued, never another
-- account's, nor a legacy row from before accounts were recorded (whose account is unknown: any
-- service could name it). Operators and the console cancel any row by its id with email_cancel_email. The enqueuer and operator roles may call it.
-- Result: affected (1 cancelled; 0 when a send may be in flight or done: a started claim, Sent,
-- UnknownOutcome; when the row is already Failed; or when the calling account has no row with that
-- notification_id), attempt_id (NULL: no such row of the caller's), from_status (the status it was
-- cancelled from). The answer says nothing of the suppression list: a row that ended Failed
-- 'Suppressed' without being handed to SES is cancelled as the due row it was (1, from_status Pending
-- or Retrying, last_error_code 'Cancelled'; email_internal_cancel).
CREATE PROCEDURE email_cancel(
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  IN p_cancelled_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  IF p_notification_id IS NULL OR CHAR_LENGTH(p_notification_id) < 1 OR CHAR_LENGTH(p_notification_id) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_cancel: notification_id must be 1 to 191 characters';
  END IF;
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_id = NULL;
    SELECT id INTO v_id FROM email_delivery_attempts
     WHERE notification_id = p_notification_id COLLATE utf8mb4_bin
       AND account = SUBSTRING_INDEX(SESSION_USER(), '@', 1)
     ORDER BY id
     LIMIT 1;
  END;
  CALL email_internal_cancel('email_cancel', v_id, p_cancelled_by, p_reason);
END
