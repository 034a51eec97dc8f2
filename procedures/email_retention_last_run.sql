-- When the last retention run finished (its last batch found nothing left to delete) and when the
-- last one started, on the database clock: for the worker's /metrics (the alert on retention not run)
-- and `status`. Reads email_retention_runs backwards from its newest row. Result: one row:
-- last_finished_at (NULL when no run has finished), last_started_at (NULL when none started),
-- database_now.
CREATE PROCEDURE email_retention_last_run()
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  SELECT (SELECT finished_at FROM email_retention_runs
           WHERE finished_at IS NOT NULL ORDER BY id DESC LIMIT 1) AS last_finished_at,
         (SELECT started_at FROM email_retention_runs ORDER BY id DESC LIMIT 1) AS last_started_at,
         UTC_TIMESTAMP(6) AS database_now;
END
