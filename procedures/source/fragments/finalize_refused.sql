-- Refuse a finalize (the end of a claim) whose arguments break a rule: its claim's id and token, then
-- the caller's own arguments' rules, then the finalize's (finalize_refusals). For the single finalize
-- procedures and email_finalize_and_start, before their unit of work opens.
--   where          the public procedure named in an error (a quoted literal)
--   more_refusals  CASE branches of the caller's own arguments (or nothing)
--   delay_field    how the caller names the delay in an error (a quoted literal)
{{>refuse | where = {{where}} | refusal = CASE
  {{>id_refusal | id = {{id}}}}
  {{>token_refusal | token = {{token}}}}
  {{more_refusals}}
  {{>finalize_refusals | outcome = {{outcome}} | provider_message_id = {{provider_message_id}} | error_code = {{error_code}} | delay = {{delay}} | delay_field = {{delay_field}}}}
END}}
