-- CASE branches: the rules of a claim's own arguments, once, for every claim (the batch claims, the
-- reservation, the try-claim by id): the claim token it mints, who claims (1 to 191 characters) and
-- the lease (1 to 86400 seconds), all 45007 (invalid_claim); then {{more_refusals}} (the caller's
-- own, or nothing); then the claimer's name as a text field (45010, unsafe_text).
{{>token_refusal | token = {{token}}}}
WHEN {{claimed_by}} IS NULL OR CHAR_LENGTH({{claimed_by}}) < 1 OR CHAR_LENGTH({{claimed_by}}) > 191 THEN
  '45007: claimed_by must be 1 to 191 characters'
WHEN {{lease}} IS NULL OR {{lease}} < 1 OR {{lease}} > 86400 THEN '45007: lease_seconds must be 1 to 86400'
{{more_refusals}}
WHEN {{claimed_by}} REGEXP {{>unsafe_text_pattern}} THEN
  '45010: claimed_by must not contain control characters, line or paragraph separators, bidi formatting or invisible format characters'
