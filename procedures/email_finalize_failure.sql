-- The provider call failed. Permanent, or the attempt that used up max_attempts: Failed. Otherwise
-- Retrying, due again after retry_delay_seconds (the worker's backoff). Fenced by id and claim token.
-- Result: affected, status (the status written; NULL when affected is 0).
CREATE PROCEDURE email_finalize_failure(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_permanent TINYINT,
  IN p_error_code TEXT CHARACTER SET utf8mb4,
  IN p_error_message TEXT CHARACTER SET utf8mb4,
  IN p_retry_delay_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  IF p_permanent IS NULL OR p_permanent NOT IN (0, 1) THEN
    CALL email_internal_check_claim('email_finalize_failure', p_id, p_claim_token);
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_finalize_failure: permanent must be 0 or 1';
  END IF;
  CALL email_internal_finalize('email_finalize_failure', p_id, p_claim_token, IF(p_permanent = 1, 'Failed', 'Retrying'),
                               NULL, p_error_code, p_error_message, 'retry_delay_seconds', p_retry_delay_seconds, v_to);
  SELECT IF(v_to IS NULL, 0, 1) AS affected, v_to AS status;
END
