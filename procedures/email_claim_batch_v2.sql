-- email_claim_batch with a bound on what one claim carries: the same claim (email_internal_claim_batch),
-- and the same result columns plus body_bytes (text and HTML bodies together, in bytes). A row whose
-- bodies are larger than max_inline_body_bytes comes back with both bodies NULL: fetch them with
-- email_claimed_bodies when it is about to be sent, so a worker's memory follows what it is sending,
-- not its batch size. Then message_options (the JSON of recipients, headers, tags, template... of a row
-- enqueued by email_enqueue_message; NULL otherwise) and attachment_bytes (load them with
-- email_claimed_attachments just before the send). Call it with autocommit on: it commits its own
-- transaction.
CREATE PROCEDURE email_claim_batch_v2(
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT,
  IN p_max_inline_body_bytes BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  IF p_max_inline_body_bytes IS NULL OR p_max_inline_body_bytes < 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_claim_batch_v2: max_inline_body_bytes must be 0 or more';
  END IF;
  CALL email_internal_claim_batch('email_claim_batch_v2', p_claim_token, p_claimed_by, p_lease_seconds, p_limit);
  SELECT a.id, a.notification_id, a.to_address, a.from_address, a.subject,
         IF(COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) <= p_max_inline_body_bytes,
            a.text_body, NULL) AS text_body,
         IF(COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) <= p_max_inline_body_bytes,
            a.html_body, NULL) AS html_body,
         a.attempt_count, a.max_attempts, a.lease_expires_at,
         COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) AS body_bytes,
         a.message_options, a.attachment_bytes
    FROM email_claim_batch_ids c
         STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
   WHERE a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
   ORDER BY a.next_attempt_at, a.id;
END
