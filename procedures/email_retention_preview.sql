-- Retention's dry run: how many emails email_retention with the same older_than_days would delete
-- now (Sent and Failed rows whose final transition is older than the cutoff) and how many of them are
-- less than a day old, changing nothing. One consistent read of the table (locks nothing); on a large
-- table it reads every row once, like a retention run. Refusals: 45001 (older_than_days).
-- Result: would_delete, under_a_day_old, oldest_final_at, cutoff.
CREATE PROCEDURE email_retention_preview(
  IN p_older_than_days BIGINT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_cutoff DATETIME(6);
  IF p_older_than_days IS NULL OR p_older_than_days < 0 OR p_older_than_days > 36500 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_retention_preview: older_than_days must be 0 to 36500';
  END IF;
  SET v_cutoff = v_now - INTERVAL p_older_than_days DAY;
  SELECT COUNT(*) AS would_delete,
         COALESCE(SUM(updated_at >= v_now - INTERVAL 1 DAY), 0) AS under_a_day_old,
         MIN(updated_at) AS oldest_final_at,
         v_cutoff AS cutoff
    FROM email_delivery_attempts
   WHERE status IN ('Sent', 'Failed') AND updated_at < v_cutoff;
END
