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
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  {{>undo_on_error | own = v_own}}
  {{>finalize_refused | where = 'email_finalize_sent' | id = p_id | token = p_claim_token | more_refusals =  | outcome = 'Sent' | provider_message_id = p_provider_message_id | error_code = NULL | delay = 0 | delay_field = NULL}}
  {{>unit_begin | own = v_own}}
  {{>finalize_settle | id = p_id | token = p_claim_token | outcome = 'Sent' | provider_message_id = p_provider_message_id | error_code = NULL | error_message = NULL | delay = 0 | to_status = v_to}}
  {{>unit_end | own = v_own}}
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
