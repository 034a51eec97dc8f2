-- Refuse a finalize (the end of a claim) whose arguments break a rule (finalize_refusal). For the
-- single finalize procedures, before their unit of work opens.
--   where  the public procedure named in an error (a quoted literal)
{{>refuse | where = {{where}} | refusal = {{>finalize_refusal | id = {{id}} | token = {{token}} | more_refusals = {{more_refusals}} | outcome = {{outcome}} | provider_message_id = {{provider_message_id}} | error_code = {{error_code}} | delay = {{delay}} | delay_field = {{delay_field}}}}}}
