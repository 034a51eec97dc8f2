-- The provider answered: a probe, or any send, was accepted (or refused in words that prove it is
-- up). open or half_open -> closed, since = now; every replica claims as usual again. Already closed:
-- affected 0. Logged with how long the provider was down. Result: affected.
CREATE PROCEDURE email_breaker_close(
  IN p_provider TEXT CHARACTER SET utf8mb4,
  IN p_closed_by TEXT CHARACTER SET utf8mb4,
  IN p_detail TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_state VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_since DATETIME(6);
  DECLARE v_probes INT;
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_check_breaker_args('email_breaker_close', p_provider, 'closed_by', p_closed_by, NULL, NULL);
  CALL email_internal_begin(v_own);
  SELECT state, since, probes INTO v_state, v_since, v_probes FROM email_provider_breaker
   WHERE provider = p_provider COLLATE utf8mb4_unicode_ci AND state <> 'closed'
     FOR UPDATE;
  IF v_state IS NOT NULL THEN
    UPDATE email_provider_breaker
       SET state = 'closed', since = v_now, changed_at = v_now, changed_by = p_closed_by,
           probe_at = NULL, probe_by = NULL, row_version = row_version + 1
     WHERE provider = p_provider COLLATE utf8mb4_unicode_ci;
    SET v_affected = ROW_COUNT();
    CALL email_internal_breaker_log(p_provider, v_now, v_state, 'closed', p_closed_by,
      LEFT(CONCAT('provider answering again after ', ROUND(TIMESTAMPDIFF(MICROSECOND, v_since, v_now) / 1000000, 1),
                  ' s down and ', v_probes, ' probes', COALESCE(CONCAT(': ', p_detail), '')), 2000));
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected;
END
