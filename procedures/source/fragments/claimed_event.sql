-- The audit event of a claim, as the values of an INSERT ... SELECT into email_delivery_events
-- (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail).
{{id}}, {{now}}, {{from_status}}, 'Processing', {{token}}, {{claimed_by}}, SESSION_USER(), 'claimed'
