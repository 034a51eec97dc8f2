-- email_claim_batch with a bound on what one claim carries (the Python worker's claim): the same
-- claim and the same columns, but a row whose bodies (text and HTML together, body_bytes) are larger
-- than max_inline_body_bytes comes back with both bodies NULL: load them with email_claimed_bodies
-- just before its send, so a worker's memory follows what it is sending, not its batch size.
-- Attachments never come with a claim: email_claimed_attachments. Call it with autocommit on: it
-- commits its own transaction. Result: the claim row shape, as email_claim_batch.
CREATE PROCEDURE email_claim_batch_bounded(
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT,
  IN p_max_inline_body_bytes BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  {{>claim_batch | where = 'email_claim_batch_bounded' | token = p_claim_token | claimed_by = p_claimed_by | lease = p_lease_seconds | limit = p_limit | max_inline = p_max_inline_body_bytes | reserve = 0}}
END
