-- SES accepted the message: Processing -> Sent, fenced by id and claim token, claim cleared.
-- Result: affected (0: the caller no longer holds the claim; never retry that as a write).
CREATE PROCEDURE email_finalize_sent(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_provider_message_id TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_actor VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_id IS NULL OR p_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_sent: id must be a positive integer';
  END IF;
  IF p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_sent: claim_token must be 1 to 64 characters';
  END IF;
  IF p_provider_message_id IS NULL OR CHAR_LENGTH(p_provider_message_id) < 1
     OR CHAR_LENGTH(p_provider_message_id) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_sent: provider_message_id must be 1 to 191 characters';
  END IF;
  CALL email_internal_begin(v_own);
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET status = 'Sent',
         attempt_count = attempt_count + 1,
         last_attempt_at = v_now,
         provider_message_id = p_provider_message_id,
         sent_at = v_now,
         claim_token = NULL,
         lease_expires_at = NULL,
         claimed_from_status = NULL,
         row_version = row_version + 1,
         updated_at = v_now
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing';
  SET v_affected = ROW_COUNT();
  IF v_affected = 1 THEN
    SELECT claimed_by INTO v_actor FROM email_delivery_attempts WHERE id = p_id;
    CALL email_internal_record_event(p_id, v_now, 'Processing', 'Sent', p_claim_token, v_actor,
                                     CONCAT('provider_message_id=', p_provider_message_id));
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected;
END
