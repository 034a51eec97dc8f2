-- Operator only, after checking SES: UnknownOutcome -> Pending, due now. The email may reach the
-- recipient twice if SES had in fact accepted it. If the attempts are used up, one more is granted,
-- or the row could never be claimed again. Audited with who and why. Result: affected.
CREATE PROCEDURE email_requeue_unknown_outcome(
  IN p_id BIGINT,
  IN p_requeued_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_id IS NULL OR p_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_requeue_unknown_outcome: id must be a positive integer';
  END IF;
  CALL email_internal_check_name('email_requeue_unknown_outcome', 'requeued_by', p_requeued_by, 191);
  CALL email_internal_check_name('email_requeue_unknown_outcome', 'reason', p_reason, 2000);
  CALL email_internal_begin(v_own);
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET status = 'Pending',
         max_attempts = GREATEST(max_attempts, attempt_count + 1),
         next_attempt_at = v_now,
         row_version = row_version + 1,
         updated_at = v_now
   WHERE id = p_id
     AND status = 'UnknownOutcome';
  SET v_affected = ROW_COUNT();
  IF v_affected = 1 THEN
    CALL email_internal_record_event(p_id, v_now, 'UnknownOutcome', 'Pending', NULL, p_requeued_by, CONCAT('requeued: ', p_reason));
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected;
END
