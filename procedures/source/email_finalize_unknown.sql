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
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  {{>undo_on_error | own = v_own}}
  {{>finalize_refused | where = 'email_finalize_unknown' | id = p_id | token = p_claim_token | more_refusals =  | outcome = 'UnknownOutcome' | provider_message_id = NULL | error_code = NULL | delay = 0 | delay_field = NULL}}
  {{>unit_begin | own = v_own}}
  {{>finalize_settle | id = p_id | token = p_claim_token | outcome = 'UnknownOutcome' | provider_message_id = NULL | error_code = NULL | error_message = p_error_message | delay = 0 | to_status = v_to}}
  {{>unit_end | own = v_own}}
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
