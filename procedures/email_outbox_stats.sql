-- One row per status, all six always present: status, count, oldest_due_at (the earliest
-- next_attempt_at among Pending, Retrying and Processing rows; NULL for the terminal statuses).
-- Result: status, count, oldest_due_at (six rows).
CREATE PROCEDURE email_outbox_stats()
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  SELECT s.status, COALESCE(c.n, 0) AS `count`, c.oldest_due_at
    FROM (SELECT 1 AS ord, 'Pending' AS status UNION ALL SELECT 2, 'Retrying'
          UNION ALL SELECT 3, 'Processing' UNION ALL SELECT 4, 'Sent'
          UNION ALL SELECT 5, 'Failed' UNION ALL SELECT 6, 'UnknownOutcome') s
    LEFT JOIN (SELECT CAST(status AS CHAR) AS status, COUNT(*) AS n,
                      IF(status IN ('Pending', 'Retrying', 'Processing'), MIN(next_attempt_at), NULL) AS oldest_due_at
                 FROM email_delivery_attempts
                GROUP BY status) c
      ON c.status = s.status
   ORDER BY s.ord;
END
