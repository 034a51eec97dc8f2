-- Sweep stale leases, then claim up to p_limit due rows for one worker in one short transaction.
-- Concurrent callers never wait on each other's rows (FOR UPDATE SKIP LOCKED) and never share a row.
-- A row whose to_address is on the suppression list ends Failed ('Suppressed') instead of being
-- claimed; a cc, bcc or other to address suppressed since the enqueue is left out of message_options.
-- Call it with autocommit on: it commits its own transaction. The rows are returned only after the
-- claim has committed, so a caller never holds a row the database does not agree it owns.
-- Result: the claimed rows in the claim row shape (id, notification_id, to_address, from_address,
-- subject, text_body, html_body, attempt_count, max_attempts, lease_expires_at, body_bytes,
-- message_options, attachment_bytes, tenant, ses_tenant_name, created_at), bodies always inline:
-- email_claim_batch_bounded with no bound.
CREATE PROCEDURE email_claim_batch(
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  {{>claim_batch | where = 'email_claim_batch' | token = p_claim_token | claimed_by = p_claimed_by | lease = p_lease_seconds | limit = p_limit | max_inline = 9223372036854775807 | reserve = 0}}
END
