-- Give a claimed row back unsent (throttled, paused, provider disabled, shutting down): back to the
-- status it was claimed from, attempt not counted, due again after delay_seconds. Result: affected.
CREATE PROCEDURE email_release_claim(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_delay_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_actor VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_id IS NULL OR p_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_release_claim: id must be a positive integer';
  END IF;
  IF p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_release_claim: claim_token must be 1 to 64 characters';
  END IF;
  IF p_delay_seconds IS NULL OR p_delay_seconds < 0 OR p_delay_seconds > 604800 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_release_claim: delay_seconds must be 0 to 604800';
  END IF;
  CALL email_internal_begin(v_own);
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET status = COALESCE(claimed_from_status, 'Pending'),
         next_attempt_at = v_now + INTERVAL p_delay_seconds SECOND,
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
    SELECT claimed_by, status INTO v_actor, v_to FROM email_delivery_attempts WHERE id = p_id;
    CALL email_internal_record_event(p_id, v_now, 'Processing', v_to, p_claim_token, v_actor,
                                     CONCAT('released, due again in ', p_delay_seconds, 's'));
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected;
END
