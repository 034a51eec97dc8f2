-- The provider call ended ambiguously (read timeout after the request left, connection reset,
-- anything unexpected): straight to UnknownOutcome, which nothing retries. Result: affected.
CREATE PROCEDURE email_finalize_unknown(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_error_message TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  CALL email_internal_finalize('email_finalize_unknown', p_id, p_claim_token, 'UnknownOutcome', NULL, NULL,
                               p_error_message, NULL, 0, v_to);
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
