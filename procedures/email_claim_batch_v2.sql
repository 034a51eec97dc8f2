-- Deprecated: the old name of email_claim_batch_bounded (same arguments, same result), kept as a thin
-- wrapper for one release so callers still using it keep working; the next release's migration drops
-- it. Call email_claim_batch_bounded. Result: the claim row shape, as email_claim_batch_bounded.
CREATE PROCEDURE email_claim_batch_v2(
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT,
  IN p_max_inline_body_bytes BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  CALL email_internal_claim_rows('email_claim_batch_v2', p_claim_token, p_claimed_by, p_lease_seconds, p_limit,
                                 p_max_inline_body_bytes, 0);
END
