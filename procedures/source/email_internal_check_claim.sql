-- Internal: the argument rules of every call that names a claimed row (id and claim token), for the
-- procedures that CALL it. p_where names the public procedure in the error, so a caller reads
-- 'email_claimed_bodies: ...'.
CREATE PROCEDURE email_internal_check_claim(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  {{>refuse | where = p_where | refusal = CASE {{>id_refusal | id = p_id}} {{>token_refusal | token = p_claim_token}} END}}
END
