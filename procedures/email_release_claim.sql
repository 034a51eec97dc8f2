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
  IF p_id IS NULL OR p_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_release_claim: id must be a positive integer';
  END IF;
  IF p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_release_claim: claim_token must be 1 to 64 characters';
  END IF;
  IF p_delay_seconds IS NULL OR p_delay_seconds < 0 OR p_delay_seconds > 604800 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_release_claim: delay_seconds must be 0 to 604800';
  END IF;
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET status = COALESCE(claimed_from_status, 'Pending'),
         next_attempt_at = v_now + INTERVAL p_delay_seconds SECOND,
         claim_token = NULL,
         lease_expires_at = NULL,
         claimed_from_status = NULL,
         row_version = row_version + 1,
         updated_at = v_now,
         updated_by = claimed_by,
         transition_detail = CONCAT('released, due again in ', p_delay_seconds, 's')
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing';
  SELECT ROW_COUNT() AS affected;
END
