-- Worker: SES answered a send with a throttling error: cut the account's shared rate in force to
-- p_cut_share of itself (0.05 to 1), growing back to pace_rate over p_recover_seconds (1 to 3600). At
-- most one cut a second, whoever reports it: a burst of throttled answers to sends already in flight
-- is one signal. Commits its own transaction.
-- Result: affected (1 cut, 0 one was made within the last second), rate (in force after it).
CREATE PROCEDURE email_send_rate_throttled(
  IN p_worker TEXT CHARACTER SET utf8mb4,
  IN p_cut_share DOUBLE,
  IN p_recover_seconds DOUBLE
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_throttled_at DATETIME(6);
  DECLARE v_rate DOUBLE;
  DECLARE v_used BIGINT;
  DECLARE v_paused VARCHAR(32) CHARACTER SET utf8mb4;
  DECLARE v_affected INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_name('email_send_rate_throttled', 'worker', p_worker, 191);
  IF p_cut_share IS NULL OR p_cut_share < 0.05 OR p_cut_share > 1 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_throttled: cut_share must be 0.05 to 1';
  END IF;
  IF p_recover_seconds IS NULL OR p_recover_seconds < 1 OR p_recover_seconds > 3600 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_send_rate_throttled: recover_seconds must be 1 to 3600';
  END IF;
  START TRANSACTION;
  SELECT throttled_at INTO v_throttled_at FROM email_send_rate WHERE id = 1 FOR UPDATE;
  CALL email_internal_send_rate_state(v_now, v_rate, v_used, v_paused);
  IF v_rate IS NOT NULL AND (v_throttled_at IS NULL OR v_throttled_at <= v_now - INTERVAL 1 SECOND) THEN
    SET v_rate = GREATEST(0.1, v_rate * p_cut_share);
    UPDATE email_send_rate
       SET throttled_rate = v_rate, throttled_at = v_now, recover_seconds = p_recover_seconds,
           row_version = row_version + 1
     WHERE id = 1;
    SET v_affected = 1;
  END IF;
  COMMIT;
  SELECT v_affected AS affected, v_rate AS rate;
END
