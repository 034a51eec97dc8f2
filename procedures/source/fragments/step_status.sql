-- The outcome a worker names (email_finalize_batch's items, email_finalize_and_start) as the status
-- the end of its claim writes, or 'Started' for a reservation's start mark; NULL for anything else,
-- which the caller refuses. The outcome names are the statuses themselves: one vocabulary for the
-- SQL, the worker's steps, its logs and its metrics. Matched byte for byte: 'SENT' is not an outcome.
CASE CAST({{step}} AS BINARY)
  WHEN 'Sent' THEN 'Sent'
  WHEN 'Failed' THEN 'Failed'
  WHEN 'Retrying' THEN 'Retrying'
  WHEN 'UnknownOutcome' THEN 'UnknownOutcome'
  WHEN 'Released' THEN 'Released'
  WHEN 'Started' THEN 'Started'
END
