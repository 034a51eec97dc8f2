-- The bodies of one row the caller holds a claim on: fenced by id, claim token and Processing, so a
-- worker reads only what it is about to send. Result: text_body, html_body (no row: not held).
CREATE PROCEDURE email_claimed_bodies(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  CALL email_internal_check_claim('email_claimed_bodies', p_id, p_claim_token);
  SELECT text_body, html_body
    FROM email_delivery_attempts FORCE INDEX (PRIMARY)
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing';
END
