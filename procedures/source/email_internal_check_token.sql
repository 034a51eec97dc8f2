-- Internal: the claim token's argument rule (1 to 64 characters, else 45007, invalid_claim), for the
-- claim that mints it (email_internal_claim_batch).
CREATE PROCEDURE email_internal_check_token(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  {{>refuse | where = p_where | refusal = CASE {{>token_refusal | token = p_claim_token}} END}}
END
