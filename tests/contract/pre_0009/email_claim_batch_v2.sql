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
  CALL email_internal_claim_v2('email_claim_batch_v2', p_claim_token, p_claimed_by, p_lease_seconds, p_limit,
                               p_max_inline_body_bytes, 0);
END
