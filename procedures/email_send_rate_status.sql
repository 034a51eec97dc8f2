-- The SES account's send rate and daily quota as every replica shares them, for `status`, the console
-- and /metrics.
-- Result: one row: rate (in force now), account_rate, rate_source (ses, override or default),
-- pace_rate, recovering (1: cut after SES throttled, growing back), daily_quota (NULL: none),
-- daily_source, daily_used, paused ('daily quota' or NULL), reported_at, reported_by (the last
-- GetAccount read and who made it); no row before `email-outbox migrate`.
CREATE PROCEDURE email_send_rate_status()
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_rate DOUBLE;
  DECLARE v_used BIGINT;
  DECLARE v_paused VARCHAR(32) CHARACTER SET utf8mb4;
  CALL email_internal_send_rate_state(UTC_TIMESTAMP(6), v_rate, v_used, v_paused);
  SELECT v_rate AS rate, account_rate, rate_source, pace_rate, IF(v_rate < pace_rate, 1, 0) AS recovering,
         daily_quota, daily_source, v_used AS daily_used, v_paused AS paused, reported_at, reported_by
    FROM email_send_rate WHERE id = 1;
END
