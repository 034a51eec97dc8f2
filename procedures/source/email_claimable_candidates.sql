-- Due Pending/Retrying rows in claim order (highest priority first, then oldest due), with their
-- message columns. A non-locking read: callers follow it with email_try_claim per row, whose result is
-- the row as claimed (send that one: recipients suppressed since are left out there). UnknownOutcome
-- never appears (its claim_due_at is NULL), nor a row its tenant holds (paused, below the
-- reputation guard's priority, or at its daily quota or send rate: no send left now). Result: id, notification_id, to_address, from_address,
-- subject, text_body, html_body, status, attempt_count, max_attempts, next_attempt_at, body_bytes,
-- message_options, attachment_bytes.
CREATE PROCEDURE email_claimable_candidates(
  IN p_limit BIGINT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_claimable_candidates: limit must be 1 to 10000';
  END IF;
  SELECT a.id, a.notification_id, a.to_address, a.from_address, a.subject, a.text_body, a.html_body,
         a.status, a.attempt_count, a.max_attempts, a.next_attempt_at,
         {{>body_bytes}} AS body_bytes,
         a.message_options, a.attachment_bytes
    FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_claim_queue)
         STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id
   WHERE a.claim_queue_rank IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
     AND {{>claimable | now = UTC_TIMESTAMP(6)}}
     AND {{>tenant_allows | tenant = t | rank = a.claim_queue_rank | now = UTC_TIMESTAMP(6)}}
   ORDER BY a.claim_queue_rank, a.claim_due_at, a.id
   LIMIT p_limit;
END
