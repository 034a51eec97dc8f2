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
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  CALL email_internal_finalize('email_finalize_sent', p_id, p_claim_token, 'Sent', p_provider_message_id,
                               NULL, NULL, NULL, 0, v_to);
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
