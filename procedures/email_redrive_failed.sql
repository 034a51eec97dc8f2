-- Operator: send again an email that failed without SES ever accepting it (an outage used up its
-- attempts, a fixed configuration). Failed -> Pending, due now, attempt_count 0, the same
-- notification id; the rule (no MessageId, no accepting SES event, never UnknownOutcome) is
-- email_internal_redrive's. Audited with who and why. affected 0 for any other row (Sent, open, a
-- Failed row SES accepted, an unknown id): nothing is sent twice by a redrive. A Failed row whose
-- content is gone (erased, bodies purged, an attachment missing) is refused with 45009 and the reason.
-- Result: affected, attempt_id (NULL for an unknown notification id).
CREATE PROCEDURE email_redrive_failed(
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  IN p_redriven_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_notification_id IS NULL OR CHAR_LENGTH(p_notification_id) < 1 OR CHAR_LENGTH(p_notification_id) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_redrive_failed: notification_id must be 1 to 191 characters';
  END IF;
  CALL email_internal_check_name('email_redrive_failed', 'redriven_by', p_redriven_by, 191);
  CALL email_internal_check_name('email_redrive_failed', 'reason', p_reason, 2000);
  -- Notification ids are per enqueuing account: the caller's own row first, then a legacy one, then
  -- the oldest of another account's (an operator's redrive).
  SELECT id INTO v_id FROM email_delivery_attempts WHERE notification_id = p_notification_id
   ORDER BY account = SUBSTRING_INDEX(SESSION_USER(), '@', 1) DESC, account = '' DESC, id
   LIMIT 1;
  IF v_id IS NOT NULL THEN
    CALL email_internal_begin(v_own);
    CALL email_internal_redrive(v_id, v_now, p_redriven_by, p_reason, 0, 1, v_affected);
    CALL email_internal_end(v_own);
  END IF;
  SELECT v_affected AS affected, v_id AS attempt_id;
END
