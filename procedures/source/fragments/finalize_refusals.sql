-- CASE branches: every rule about a finalize's arguments (the end of a claim), once, for the single
-- finalizes, email_finalize_and_start and each item of email_finalize_batch (its claim's id and token
-- are id_refusal and token_refusal, before these).
--   outcome      the status to write: 'Sent', 'Failed', 'Retrying', 'UnknownOutcome' or 'Released'
--   delay_field  how the caller names the delay in the message (a quoted literal)
WHEN {{outcome}} IS NULL OR {{outcome}} NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released') THEN
  '45001: outcome must be Sent, Failed, Retrying, UnknownOutcome or Released'
WHEN {{outcome}} = 'Sent' AND (CHAR_LENGTH({{provider_message_id}}) BETWEEN 1 AND 191) IS NOT TRUE THEN
  '45001: provider_message_id must be 1 to 191 characters'
WHEN CHAR_LENGTH({{error_code}}) > 191 THEN '45001: error_code must be at most 191 characters'
WHEN {{outcome}} IN ('Retrying', 'Failed', 'Released') AND ({{delay}} IS NULL OR {{delay}} < 0 OR {{delay}} > 604800) THEN
  CONCAT('45001: ', {{delay_field}}, ' must be 0 to 604800')
