-- Operator only: record the verdict after looking the message up in SES event data.
-- UnknownOutcome -> Sent (optionally with the MessageId found) or Failed. Audited. Result: affected.
CREATE PROCEDURE email_resolve_unknown_outcome(
  IN p_id BIGINT,
  IN p_outcome TEXT CHARACTER SET utf8mb4,
  IN p_resolved_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4,
  IN p_provider_message_id TEXT CHARACTER SET utf8mb4
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
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_resolve_unknown_outcome: id must be a positive integer';
  END IF;
  IF p_outcome IS NULL OR p_outcome COLLATE utf8mb4_bin NOT IN ('Sent', 'Failed') THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_resolve_unknown_outcome: outcome must be Sent or Failed';
  END IF;
  CALL email_internal_check_name('email_resolve_unknown_outcome', 'resolved_by', p_resolved_by, 191);
  CALL email_internal_check_name('email_resolve_unknown_outcome', 'reason', p_reason, 2000);
  IF CHAR_LENGTH(p_provider_message_id) > 191 OR (p_outcome = 'Failed' AND p_provider_message_id IS NOT NULL) THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT =
      'email_resolve_unknown_outcome: provider_message_id must be at most 191 characters, and only given with Sent';
  END IF;
  CALL email_internal_check_text('email_resolve_unknown_outcome', 'provider_message_id', p_provider_message_id, 'text');
  CALL email_internal_begin(v_own);
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET status = p_outcome,
         provider_message_id = COALESCE(p_provider_message_id, provider_message_id),
         sent_at = IF(p_outcome = 'Sent', v_now, sent_at),
         row_version = row_version + 1,
         updated_at = v_now
   WHERE id = p_id
     AND status = 'UnknownOutcome';
  SET v_affected = ROW_COUNT();
  IF v_affected = 1 THEN
    CALL email_internal_record_event(p_id, v_now, 'UnknownOutcome', p_outcome, NULL, p_resolved_by, CONCAT('resolved as ', p_outcome, ': ', p_reason));
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected;
END
