-- Internal: the outcome a worker names (email_finalize_batch's items, email_finalize_and_start) as the
-- status email_internal_finalize takes. Matched byte for byte: 'Sent' or 'SENT' is not an outcome.
-- p_status is NULL for anything else, which email_internal_finalize refuses with its message.
CREATE PROCEDURE email_internal_step_status(
  IN p_step TEXT CHARACTER SET utf8mb4,
  OUT p_status VARCHAR(20) CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  SET p_status = CASE CAST(p_step AS BINARY)
                   WHEN 'sent' THEN 'Sent'
                   WHEN 'failed' THEN 'Failed'
                   WHEN 'retry' THEN 'Retrying'
                   WHEN 'unknown' THEN 'UnknownOutcome'
                   WHEN 'released' THEN 'Released'
                   WHEN 'started' THEN 'Started'
                 END;
END
