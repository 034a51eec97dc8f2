-- Sweep stale leases, then claim up to p_limit due rows for one worker in one short transaction.
-- Concurrent callers never wait on each other's rows (FOR UPDATE SKIP LOCKED) and never share a row.
-- Call it with autocommit on: it commits its own transaction. The rows are returned only after the
-- claim has committed, so a caller never holds a row the database does not agree it owns.
-- Result: the claimed rows (id, notification_id, to_address, from_address, subject, text_body,
-- html_body, attempt_count, max_attempts, lease_expires_at).
CREATE PROCEDURE email_claim_batch(
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  CALL email_internal_claim_batch('email_claim_batch', p_claim_token, p_claimed_by, p_lease_seconds, p_limit, 0);
  SELECT a.id, a.notification_id, a.to_address, a.from_address, a.subject, a.text_body, a.html_body,
         a.attempt_count, a.max_attempts, a.lease_expires_at
    FROM email_claim_batch_ids c
         STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
   WHERE a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
   ORDER BY a.next_attempt_at, a.id;
END
