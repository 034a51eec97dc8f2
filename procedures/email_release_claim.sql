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
  CALL email_internal_finalize('email_release_claim', p_id, p_claim_token, 'Released', NULL, NULL, NULL,
                               'delay_seconds', p_delay_seconds, v_to);
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
