-- The one change that ends a claim, as the SET list of an UPDATE of email_delivery_attempts `a`: the
-- row leaves Processing and every claim column is cleared (the error message is the statement's own:
-- writes_error says when). settle_one makes it for one claim, email_finalize_batch for a set.
--   outcome  'Sent'            provider_message_id and sent_at set
--            'Failed'          a permanent failure
--            'Retrying'        due again after delay seconds; Failed instead on the attempt that
--                              uses up max_attempts
--            'UnknownOutcome'  never resent automatically
--            'Released'        not sent: back to the status it was claimed from, attempt not counted,
--                              due again after delay seconds
--   expired_by  the sweep's fence (NULL: any live claim): a swept attempt is dated from its claim
-- Every expression reads attempt_count, claimed_at and claimed_from_status before they are assigned,
-- so the row written is the same whether the server assigns left to right or simultaneously
-- (MariaDB's SIMULTANEOUS_ASSIGNMENT, or a buffered table of a multi-table UPDATE).
a.status = {{>settle_status | outcome = {{outcome}}}},
a.next_attempt_at = IF({{outcome}} = 'Released' OR ({{outcome}} = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                       {{now}} + INTERVAL {{delay}} SECOND, a.next_attempt_at),
a.last_attempt_at = IF({{outcome}} <> 'Released', IF({{expired_by}} IS NULL, {{now}}, a.claimed_at), a.last_attempt_at),
a.last_error_code = IF({{>writes_error | outcome = {{outcome}}}}, {{error_code}}, a.last_error_code),
a.provider_message_id = IF({{outcome}} = 'Sent', {{provider_message_id}}, a.provider_message_id),
a.sent_at = IF({{outcome}} = 'Sent', {{now}}, a.sent_at),
a.attempt_count = a.attempt_count + IF({{outcome}} <> 'Released', 1, 0),
a.claim_token = NULL,
a.lease_expires_at = NULL,
a.claimed_from_status = NULL,
a.reserved_at = NULL,
a.row_version = a.row_version + 1,
a.updated_at = {{now}}
