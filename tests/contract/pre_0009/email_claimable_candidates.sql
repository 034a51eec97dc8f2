-- Due Pending/Retrying rows, oldest due first, with their message columns. A non-locking read:
-- callers follow it with email_try_claim per row. UnknownOutcome never appears (its claim_due_at is NULL).
CREATE PROCEDURE email_claimable_candidates(
  IN p_limit BIGINT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_claimable_candidates: limit must be 1 to 10000';
  END IF;
  SELECT id, notification_id, to_address, from_address, subject, text_body, html_body,
         status, attempt_count, max_attempts, next_attempt_at
    FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim)
   WHERE claim_due_at <= UTC_TIMESTAMP(6)
     AND attempt_count < max_attempts
   ORDER BY claim_due_at, id
   LIMIT p_limit;
END
