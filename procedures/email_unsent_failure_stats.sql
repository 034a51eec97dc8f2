-- Count the emails that ended Failed within the last p_window_seconds without ever being handed to
-- SES, apart from the failures SES caused or used-up attempts. Reads the Failed rows' range of the
-- lease index. For `status` and the worker's /metrics. Result: reason, count: one row each for
-- 'Expired', 'Cancelled' and 'Suppressed' (count 0 when none).
CREATE PROCEDURE email_unsent_failure_stats(
  IN p_window_seconds BIGINT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  IF p_window_seconds IS NULL OR p_window_seconds < 1 OR p_window_seconds > 31622400 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_unsent_failure_stats: window_seconds must be 1 to 31622400';
  END IF;
  SELECT r.reason, COALESCE(c.n, 0) AS `count`
    FROM (SELECT 1 AS ord, 'Expired' AS reason UNION ALL SELECT 2, 'Cancelled' UNION ALL SELECT 3, 'Suppressed') r
    LEFT JOIN (SELECT last_error_code AS reason, COUNT(*) AS n
                 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_lease)
                WHERE status = 'Failed'
                  AND last_error_code IN ('Expired', 'Cancelled', 'Suppressed')
                  AND updated_at >= UTC_TIMESTAMP(6) - INTERVAL p_window_seconds SECOND
                GROUP BY last_error_code) c
      ON c.reason = r.reason COLLATE utf8mb4_unicode_ci
   ORDER BY r.ord;
END
