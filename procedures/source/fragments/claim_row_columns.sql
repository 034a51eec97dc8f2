-- The claim row shape (docs/procedures.md, "The claimed row") of email_delivery_attempts `a` and its
-- tenant `t`: bodies up to {{max_inline}} bytes together, else both NULL (load them with
-- email_claimed_bodies), then body_bytes, message_options, attachment_bytes, the tenant and its SES
-- tenant name, then created_at (added in 0.2.0, at the end so a caller reading columns by position
-- keeps working). email_try_claim returns the same columns after its `affected`.
a.id, a.notification_id, a.to_address, a.from_address, a.subject,
IF({{>body_bytes}} <= {{max_inline}}, a.text_body, NULL) AS text_body,
IF({{>body_bytes}} <= {{max_inline}}, a.html_body, NULL) AS html_body,
a.attempt_count, a.max_attempts, a.lease_expires_at,
{{>body_bytes}} AS body_bytes,
a.message_options, a.attachment_bytes, t.name AS tenant, t.ses_tenant_name, a.created_at
