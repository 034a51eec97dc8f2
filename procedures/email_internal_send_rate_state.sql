-- Internal: the account's send rate in force at p_now, the day's sends counted so far, and whether
-- the daily quota pauses sending, from the one email_send_rate row (the caller may hold it locked).
-- The rate in force is pace_rate, or after SES throttled, the cut rate growing back to pace_rate in a
-- straight line over recover_seconds. The day's count is SentLast24Hours at the last GetAccount read
-- plus what was handed out since; at or over daily_quota, o_paused is 'daily quota'. All NULL when the
-- row is missing.
CREATE PROCEDURE email_internal_send_rate_state(
  IN p_now DATETIME(6),
  OUT o_rate DOUBLE,
  OUT o_used BIGINT,
  OUT o_paused VARCHAR(32) CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  SET o_rate = NULL, o_used = NULL, o_paused = NULL;
  SELECT IF(throttled_rate IS NULL OR throttled_at IS NULL, pace_rate,
            LEAST(pace_rate, throttled_rate + (pace_rate - throttled_rate)
                  * GREATEST(0, TIMESTAMPDIFF(MICROSECOND, throttled_at, p_now) / 1e6) / recover_seconds)),
         sent_at_report + granted_since_report,
         IF(daily_quota IS NOT NULL AND sent_at_report + granted_since_report >= daily_quota, 'daily quota', NULL)
    INTO o_rate, o_used, o_paused
    FROM email_send_rate WHERE id = 1;
END
