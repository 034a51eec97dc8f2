-- Mark a reservation (email_reserve_batch) started, just before its send. Result: affected (1: send
-- it now; 0: do not send it: the claim is no longer held, was started already, or its lease is over).
CREATE PROCEDURE email_start_send(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  {{>undo_on_error | own = v_own}}
  {{>refuse | where = 'email_start_send' | refusal = CASE {{>id_refusal | id = p_id}} {{>token_refusal | token = p_claim_token}} END}}
  {{>unit_begin | own = v_own}}
  {{>start_one | id = p_id | token = p_claim_token | now = v_now | to_status = v_to}}
  {{>unit_end | own = v_own}}
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
