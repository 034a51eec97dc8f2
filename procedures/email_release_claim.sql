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
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  CALL email_internal_check_claim('email_release_claim', p_id, p_claim_token);
  IF p_delay_seconds IS NULL OR p_delay_seconds < 0 OR p_delay_seconds > 604800 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_release_claim: delay_seconds must be 0 to 604800';
  END IF;
  CALL email_internal_settle(p_id, p_claim_token, 'Released', p_delay_seconds, NULL, NULL, NULL, NULL, NULL, NULL, v_to);
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
