-- Worker: what the SES account allows, as this replica just read it from GetAccount (or its operator's
-- override, or the conservative default when GetAccount was refused), for every replica: account_rate
-- (MaxSendRate, sends/s) and rate_source (ses, override or default); pace_rate, what the shared
-- schedule is handed out at (a little under account_rate, at most it); daily_quota (Max24HourSend;
-- NULL: no daily limit) and daily_source; sent_last_24h (SentLast24Hours; NULL when unknown). A known
-- SentLast24Hours restarts the day's count from it; an unknown one keeps counting what was handed out,
-- from zero again once that count is a day old. Commits its own transaction. The figures are bounded
-- by what SES grants (a replica's account must not be able to unpace every replica, or stop them with
-- a quota of 0): account_rate above 0 and at most 10,000/s, daily_quota 1 to 1,000,000,000 (NULL: no
-- daily limit).
-- Result: affected (1).
CREATE PROCEDURE email_send_rate_report(
  IN p_reported_by TEXT CHARACTER SET utf8mb4,
  IN p_account_rate DOUBLE,
  IN p_rate_source TEXT CHARACTER SET utf8mb4,
  IN p_pace_rate DOUBLE,
  IN p_daily_quota BIGINT,
  IN p_daily_source TEXT CHARACTER SET utf8mb4,
  IN p_sent_last_24h BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_day_old DATETIME(6) DEFAULT UTC_TIMESTAMP(6) - INTERVAL 1 DAY;
  CALL email_internal_check_name('email_send_rate_report', 'reported_by', p_reported_by, 191);
  IF p_account_rate IS NULL OR NOT p_account_rate > 0 OR p_account_rate > 10000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_report: account_rate must be above 0 and at most 10000';
  END IF;
  IF p_pace_rate IS NULL OR NOT p_pace_rate > 0 OR p_pace_rate > p_account_rate THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_report: pace_rate must be above 0 and at most account_rate';
  END IF;
  IF p_rate_source IS NULL OR p_rate_source NOT IN ('ses', 'override', 'default') THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_report: rate_source must be ses, override or default';
  END IF;
  IF p_daily_quota IS NOT NULL AND (p_daily_quota < 1 OR p_daily_quota > 1000000000 OR p_daily_source IS NULL
                                    OR p_daily_source NOT IN ('ses', 'override', 'default')) THEN
    SIGNAL SQLSTATE '45000'
      SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_report: daily_quota must be 1 to 1000000000, with daily_source ses, override or default';
  END IF;
  IF p_sent_last_24h IS NOT NULL AND p_sent_last_24h < 0 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_report: sent_last_24h must be 0 or more';
  END IF;
  -- counted_since is assigned last: MySQL assigns left to right, and the lines above read its old value.
  UPDATE email_send_rate
     SET account_rate = p_account_rate,
         rate_source = p_rate_source,
         pace_rate = p_pace_rate,
         daily_quota = p_daily_quota,
         daily_source = IF(p_daily_quota IS NULL, NULL, p_daily_source),
         sent_at_report = IF(p_sent_last_24h IS NOT NULL, p_sent_last_24h,
                             IF(counted_since <= v_day_old, 0, sent_at_report)),
         granted_since_report = IF(p_sent_last_24h IS NOT NULL OR counted_since <= v_day_old, 0,
                                   granted_since_report),
         reported_at = v_now,
         reported_by = p_reported_by,
         row_version = row_version + 1,
         counted_since = IF(p_sent_last_24h IS NOT NULL OR counted_since <= v_day_old, v_now, counted_since)
   WHERE id = 1;
  SELECT ROW_COUNT() AS affected;
END
