-- The end of one claim as a finalize makes it (settle_one with the finalize's arguments: an
-- ambiguous outcome's error code is AmbiguousOutcome, no delay is 0), inside the caller's unit of
-- work, after finalize_refused. The caller declares v_now (DATETIME(6) DEFAULT UTC_TIMESTAMP(6)) and
-- {{to_status}}.
{{>settle_one | id = {{id}} | token = {{token}} | outcome = {{outcome}} | delay = COALESCE({{delay}}, 0) | error_code = IF({{outcome}} = 'UnknownOutcome', 'AmbiguousOutcome', {{error_code}}) | error_message = {{error_message}} | provider_message_id = {{provider_message_id}} | expired_by = NULL | actor = NULL | detail = NULL | now = v_now | to_status = {{to_status}}}}
