-- A CASE branch: the claim token's rule, 1 to 64 characters, else 45007 (invalid_claim). For the
-- claim that mints a token and every call that shows one.
WHEN (CHAR_LENGTH({{token}}) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters'
