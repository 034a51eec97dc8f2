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
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  {{>undo_on_error | own = v_own}}
  {{>finalize_refused | where = 'email_release_claim' | id = p_id | token = p_claim_token | more_refusals =  | outcome = 'Released' | provider_message_id = NULL | error_code = NULL | delay = p_delay_seconds | delay_field = 'delay_seconds'}}
  {{>unit_begin | own = v_own}}
  {{>finalize_settle | id = p_id | token = p_claim_token | outcome = 'Released' | provider_message_id = NULL | error_code = NULL | error_message = NULL | delay = p_delay_seconds | to_status = v_to}}
  {{>unit_end | own = v_own}}
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
