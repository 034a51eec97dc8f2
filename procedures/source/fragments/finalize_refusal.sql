-- A CASE expression: the refusal of a finalize (the end of a claim) whose arguments break a rule, NULL
-- when none does: its claim's id and token, then the caller's own arguments' rules, then the
-- finalize's (finalize_refusals). As `refuse` spells a refusal.
--   more_refusals  CASE branches of the caller's own arguments (or nothing)
--   delay_field    how the caller names the delay in an error (a quoted literal)
CASE
  {{>id_refusal | id = {{id}}}}
  {{>token_refusal | token = {{token}}}}
  {{more_refusals}}
  {{>finalize_refusals | outcome = {{outcome}} | provider_message_id = {{provider_message_id}} | error_code = {{error_code}} | delay = {{delay}} | delay_field = {{delay_field}}}}
END
