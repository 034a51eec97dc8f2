-- The live queue, for a gauge every worker replica may read often: one row per non-terminal status
-- (Pending, Retrying, Processing), all three always present: status, count, oldest_due_at. It reads
-- only those rows (a range of the lease index), so its cost follows the backlog, never the history:
-- the same at 10,000 and at 10,000,000 Sent rows. email_outbox_stats counts every status, for operators.
-- Result: status, count, oldest_due_at (three rows).
CREATE PROCEDURE email_outbox_queue_stats()
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  SELECT s.status, COALESCE(c.n, 0) AS `count`, c.oldest_due_at
    FROM (SELECT 1 AS ord, 'Pending' AS status UNION ALL SELECT 2, 'Retrying' UNION ALL SELECT 3, 'Processing') s
    LEFT JOIN (SELECT CAST(status AS CHAR) AS status, COUNT(*) AS n, MIN(next_attempt_at) AS oldest_due_at
                 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_lease)
                WHERE status IN ('Pending', 'Retrying', 'Processing')
                GROUP BY status) c
      ON c.status = s.status
   ORDER BY s.ord;
END
