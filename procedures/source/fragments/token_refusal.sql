-- A CASE branch: the claim token's rule, 1 to 64 characters, else 45007 (invalid_claim). For the
-- claim that mints a token and every call that shows one.
WHEN {{token}} IS NULL OR CHAR_LENGTH({{token}}) < 1 OR CHAR_LENGTH({{token}}) > 64 THEN '45007: claim_token must be 1 to 64 characters'
