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
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  {{>undo_on_error | own = v_own}}
  {{>finalize_refused | where = 'email_finalize_failure' | id = p_id | token = p_claim_token | more_refusals = WHEN p_permanent IS NULL OR p_permanent NOT IN (0, 1) THEN '45001: permanent must be 0 or 1' | outcome = IF(p_permanent = 1, 'Failed', 'Retrying') | provider_message_id = NULL | error_code = p_error_code | delay = p_retry_delay_seconds | delay_field = 'retry_delay_seconds'}}
  {{>unit_begin | own = v_own}}
  {{>finalize_settle | id = p_id | token = p_claim_token | outcome = IF(p_permanent = 1, 'Failed', 'Retrying') | provider_message_id = NULL | error_code = p_error_code | error_message = p_error_message | delay = p_retry_delay_seconds | to_status = v_to}}
  {{>unit_end | own = v_own}}
  SELECT IF(v_to IS NULL, 0, 1) AS affected, v_to AS status;
END
