-- Worker: take the next slice of the SES account's send schedule, shared by every replica of this
-- database, so that all of them together send at the account's rate however many run. A slice is at
-- most 0.25 s of the rate, starts at most 1 s from now, and a schedule left idle restarts 0.25 s back
-- (start_in_seconds down to -0.25: those sends are due at once); a replica that crashes holding a
-- slice costs the account at most that much of its rate, never more sends than the rate, and nothing
-- has to be given back. p_unused: sends of earlier slices this replica let lapse, taken off the day's
-- count. Commits its own transaction: call it with autocommit on.
-- Result: one row: granted (0 to p_wanted), start_in_seconds (the first may go that long from now),
-- interval_seconds (the others follow this far apart), wait_seconds (granted 0: ask again after this
-- long), rate (in force), account_rate, rate_source (ses, override or default), daily_quota (NULL:
-- none), daily_used, paused ('daily quota' or NULL), refresh_due (1: this caller reads GetAccount now
-- and reports it with email_send_rate_report; one caller per p_refresh_seconds).
CREATE PROCEDURE email_send_rate_take(
  IN p_worker TEXT CHARACTER SET utf8mb4,
  IN p_wanted INT,
  IN p_unused INT,
  IN p_refresh_seconds INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_next DATETIME(6);
  DECLARE v_start DATETIME(6);
  DECLARE v_reported DATETIME(6);
  DECLARE v_refresh_taken DATETIME(6);
  DECLARE v_quota BIGINT;
  DECLARE v_rate DOUBLE;
  DECLARE v_used BIGINT;
  DECLARE v_paused VARCHAR(32) CHARACTER SET utf8mb4;
  DECLARE v_ahead DOUBLE DEFAULT 0;
  DECLARE v_wait DOUBLE DEFAULT 0;
  DECLARE v_granted BIGINT DEFAULT 0;
  DECLARE v_refresh INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_name('email_send_rate_take', 'worker', p_worker, 191);
  IF p_wanted IS NULL OR p_wanted < 1 OR p_wanted > 10000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_take: wanted must be 1 to 10000';
  END IF;
  IF p_unused IS NULL OR p_unused < 0 OR p_unused > 1000000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_take: unused must be 0 to 1000000';
  END IF;
  IF p_refresh_seconds IS NULL OR p_refresh_seconds < 1 OR p_refresh_seconds > 86400 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_take: refresh_seconds must be 1 to 86400';
  END IF;
  START TRANSACTION;
  SELECT next_slice_at, reported_at, refresh_taken_at, daily_quota
    INTO v_next, v_reported, v_refresh_taken, v_quota
    FROM email_send_rate WHERE id = 1 FOR UPDATE;
  IF v_next IS NULL THEN
    SIGNAL SQLSTATE '45000'
      SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_take: email_send_rate has no row; run email-outbox migrate';
  END IF;
  IF p_unused > 0 THEN
    UPDATE email_send_rate SET granted_since_report = GREATEST(0, granted_since_report - p_unused)
     WHERE id = 1;
  END IF;
  CALL email_internal_send_rate_state(v_now, v_rate, v_used, v_paused);
  IF v_paused IS NULL THEN
    -- A schedule left idle restarts a quarter of a second back: a replica that fell behind for a
    -- moment catches up with a burst of at most that much, well within the second SES tolerates.
    SET v_start = GREATEST(v_next, v_now - INTERVAL 250000 MICROSECOND);
    SET v_ahead = TIMESTAMPDIFF(MICROSECOND, v_now, v_start) / 1e6;
    IF v_ahead > 1.0 THEN
      SET v_wait = v_ahead - 1.0;
    ELSE
      SET v_granted = LEAST(p_wanted, GREATEST(1, FLOOR(v_rate * 0.25)));
      IF v_quota IS NOT NULL THEN
        SET v_granted = LEAST(v_granted, v_quota - v_used);
      END IF;
      SET v_next = v_start + INTERVAL ROUND(v_granted / v_rate * 1000000) MICROSECOND;
    END IF;
  END IF;
  IF v_reported IS NULL OR v_reported <= v_now - INTERVAL p_refresh_seconds SECOND THEN
    IF v_refresh_taken IS NULL OR v_refresh_taken <= v_now - INTERVAL p_refresh_seconds SECOND THEN
      SET v_refresh = 1;
    END IF;
  END IF;
  IF v_paused IS NOT NULL THEN
    -- Nothing goes out before a new GetAccount read shows room: ask again when one is due.
    SET v_wait = IF(v_refresh = 1, 0,
                    GREATEST(0.1, p_refresh_seconds - TIMESTAMPDIFF(MICROSECOND, COALESCE(v_reported, v_now), v_now) / 1e6));
  END IF;
  UPDATE email_send_rate
     SET next_slice_at = v_next,
         granted_since_report = granted_since_report + v_granted,
         refresh_taken_at = IF(v_refresh = 1, v_now, refresh_taken_at),
         row_version = row_version + 1
   WHERE id = 1;
  COMMIT;
  SELECT v_granted AS granted, v_ahead AS start_in_seconds, 1 / v_rate AS interval_seconds,
         v_wait AS wait_seconds, v_rate AS rate, account_rate, rate_source, daily_quota,
         v_used + v_granted AS daily_used, v_paused AS paused, v_refresh AS refresh_due
    FROM email_send_rate WHERE id = 1;
END
