-- A replica asks to probe the provider: open (or half_open whose prober's hold has ended) and
-- probe_at reached -> half_open, held by probe_by for probe_hold_seconds; the replica then sends one
-- email. At most one replica of all probes at a time, so probes are bounded across the whole fleet.
-- Logged. Result: affected (1: this replica holds the probe), probe_at (when its hold ends).
CREATE PROCEDURE email_breaker_try_probe(
  IN p_provider TEXT CHARACTER SET utf8mb4,
  IN p_probe_by TEXT CHARACTER SET utf8mb4,
  IN p_probe_hold_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_state VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_check_breaker_args('email_breaker_try_probe', p_provider, 'probe_by', p_probe_by,
                                         'probe_hold_seconds', p_probe_hold_seconds);
  CALL email_internal_begin(v_own);
  SELECT state INTO v_state FROM email_provider_breaker
   WHERE provider = p_provider COLLATE utf8mb4_unicode_ci AND state IN ('open', 'half_open') AND probe_at <= v_now
     FOR UPDATE;
  IF v_state IS NOT NULL THEN
    UPDATE email_provider_breaker
       SET state = 'half_open',
           changed_at = v_now,
           changed_by = p_probe_by,
           probe_by = p_probe_by,
           probe_at = v_now + INTERVAL p_probe_hold_seconds SECOND,
           probes = probes + 1,
           row_version = row_version + 1
     WHERE provider = p_provider COLLATE utf8mb4_unicode_ci;
    SET v_affected = ROW_COUNT();
    CALL email_internal_breaker_log(p_provider, v_now, v_state, 'half_open', p_probe_by,
      IF(v_state = 'open', 'probing', 'probing: the previous prober''s hold ended'));
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected, IF(v_affected = 1, v_now + INTERVAL p_probe_hold_seconds SECOND, NULL) AS probe_at;
END
