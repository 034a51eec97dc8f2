-- Mark a reservation (email_reserve_batch) started, just before its send. Result: affected (1: send
-- it now; 0: do not send it: the claim is no longer held, was started already, or its lease is over).
CREATE PROCEDURE email_start_send(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  CALL email_internal_check_claim('email_start_send', p_id, p_claim_token);
  CALL email_internal_start(p_id, p_claim_token, v_to);
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
