-- A replica judged the provider down (its rule: docs/design.md, "Provider outages"), or its probe
-- failed: closed or half_open -> open, no probe before probe_after_seconds from now (the worker adds
-- the jitter). `since` keeps the time the provider was first seen down when a probe fails. Already
-- open: only the last error is brought up to date, and affected is 0. Logged in
-- email_provider_breaker_log. probe_after_seconds is 1 to 3,600: the breaker holds every replica, and
-- one replica's account must not be able to stop all sending for longer than an hour at a time (an
-- operator closes it at any moment: email-outbox breaker close). Result: affected (1: this call opened
-- it), state.
CREATE PROCEDURE email_breaker_open(
  IN p_provider TEXT CHARACTER SET utf8mb4,
  IN p_opened_by TEXT CHARACTER SET utf8mb4,
  IN p_error_code TEXT CHARACTER SET utf8mb4,
  IN p_error_message TEXT CHARACTER SET utf8mb4,
  IN p_probe_after_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_state VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_check_breaker_args('email_breaker_open', p_provider, 'opened_by', p_opened_by,
                                         'probe_after_seconds', p_probe_after_seconds);
  IF p_probe_after_seconds > 3600 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_breaker_open: probe_after_seconds must be 1 to 3600';
  END IF;
  IF CHAR_LENGTH(p_error_code) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_breaker_open: error_code must be at most 191 characters';
  END IF;
  CALL email_internal_begin(v_own);
  CALL email_internal_breaker_row(p_provider, p_opened_by, v_now, v_state);
  -- v_state, not the column: MySQL applies SET assignments left to right, so a later one would see
  -- the new state.
  UPDATE email_provider_breaker
     SET state = 'open',
         since = IF(v_state = 'closed', v_now, since),
         probes = IF(v_state = 'closed', 0, probes),
         changed_at = IF(v_state = 'open', changed_at, v_now),
         changed_by = IF(v_state = 'open', changed_by, p_opened_by),
         probe_at = IF(v_state = 'open', probe_at, v_now + INTERVAL p_probe_after_seconds SECOND),
         probe_by = IF(v_state = 'open', probe_by, NULL),
         last_error_code = p_error_code,
         last_error_message = LEFT(p_error_message, 2000),
         last_failure_at = v_now,
         row_version = row_version + 1
   WHERE provider = p_provider COLLATE utf8mb4_unicode_ci;
  IF v_state <> 'open' THEN
    SET v_affected = 1;
    CALL email_internal_breaker_log(p_provider, v_now, v_state, 'open', p_opened_by,
      LEFT(CONCAT(IF(v_state = 'closed', 'provider down: ', 'probe failed: '), COALESCE(p_error_code, '-'),
                  COALESCE(CONCAT(' ', p_error_message), ''), '; next probe in ', p_probe_after_seconds, ' s'), 2000));
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected, 'open' AS state;
END
