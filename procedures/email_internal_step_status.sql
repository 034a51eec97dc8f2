-- Internal: the outcome a worker names (email_finalize_batch's items, email_finalize_and_start) as the
-- status email_internal_finalize writes, or 'Started' for a reservation's start mark. The outcome
-- names are the statuses themselves (Sent, Failed, Retrying, UnknownOutcome, Released) and Started:
-- one vocabulary for the SQL, the worker's steps, its logs and its metrics. The lower-case step names
-- of the previous release (sent, failed, retry, unknown, released, started) are deprecated aliases,
-- accepted for this release only (docs/procedures.md, "Versions"). Matched byte for byte: 'SENT' is
-- not an outcome. p_status is NULL for anything else, which the caller refuses with its message.
CREATE PROCEDURE email_internal_step_status(
  IN p_step TEXT CHARACTER SET utf8mb4,
  OUT p_status VARCHAR(20) CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  SET p_status = CASE CAST(p_step AS BINARY)
                   WHEN 'Sent' THEN 'Sent'
                   WHEN 'Failed' THEN 'Failed'
                   WHEN 'Retrying' THEN 'Retrying'
                   WHEN 'UnknownOutcome' THEN 'UnknownOutcome'
                   WHEN 'Released' THEN 'Released'
                   WHEN 'Started' THEN 'Started'
                   WHEN 'sent' THEN 'Sent'
                   WHEN 'failed' THEN 'Failed'
                   WHEN 'retry' THEN 'Retrying'
                   WHEN 'unknown' THEN 'UnknownOutcome'
                   WHEN 'released' THEN 'Released'
                   WHEN 'started' THEN 'Started'
                 END;
END
