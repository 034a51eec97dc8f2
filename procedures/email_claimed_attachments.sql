-- The attachments of one row the caller holds a claim on, in order: fenced by id, claim token and
-- Processing like email_claimed_bodies, so a worker reads them only for the send it is about to make.
-- Result: position, filename, content_type, disposition, content_id, content (no rows: none, or not held).
CREATE PROCEDURE email_claimed_attachments(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  CALL email_internal_check_claim('email_claimed_attachments', p_id, p_claim_token);
  SELECT t.position, t.filename, t.content_type, t.disposition, t.content_id, t.content
    FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
         JOIN email_attachments t ON t.attempt_id = a.id
   WHERE a.id = p_id
     AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
   ORDER BY t.position;
END
