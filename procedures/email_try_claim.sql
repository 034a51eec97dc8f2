-- Claim one row by id: one guarded UPDATE by primary key. Checks suppression as the batch claim does:
-- a row whose to_address is on the suppression list ends Failed ('Suppressed') instead of being
-- claimed; a cc, bcc or other to address suppressed since the enqueue is left out of message_options.
-- Holds a row as the batch claims do while its tenant is paused, its reputation guard holds the row's
-- priority, or its daily quota or send rate leaves no send now (affected 0); a claim of a row whose
-- tenant has a send rate or a daily quota moves its rate schedule and day's count on by one, as the
-- batch claims do, serialised with them on the schedule's clock. It takes no share of the pass.
-- Result: one row, affected (1 won, 0 someone else did, or it is not due, or it is not claimable at
-- all), then the claim row shape of email_claim_batch (id, notification_id, to_address, from_address,
-- subject, text_body, html_body, attempt_count, max_attempts, lease_expires_at, body_bytes,
-- message_options, attachment_bytes, tenant, ses_tenant_name, created_at) as claimed, bodies inline;
-- all NULL when affected is 0.
CREATE PROCEDURE email_try_claim(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_suppressed INT DEFAULT 0;
  DECLARE v_expired_from VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_tenant_allows INT DEFAULT 0;
  DECLARE v_tenant INT UNSIGNED DEFAULT NULL;
  DECLARE v_limited INT DEFAULT 0;
  DECLARE v_clock DOUBLE;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
      IF v_own = 1 THEN
        ROLLBACK;
      ELSEIF v_own = 0 THEN
        ROLLBACK TO SAVEPOINT email_outbox_call;
      END IF;
    END;
    RESIGNAL;
  END;
  IF ((p_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) OR (p_claimed_by IS NULL OR CHAR_LENGTH(p_claimed_by) < 1 OR CHAR_LENGTH(p_claimed_by) > 191) OR (p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400) OR (p_claimed_by REGEXP REPLACE(
                                 '[~x{0}-~x{1F}~x{7F}-~x{9F}~x{2028}~x{2029}~x{202A}-~x{202E}~x{2066}-~x{2069}~x{200E}~x{200F}~x{61C}~x{AD}~x{180E}~x{200B}~x{2060}-~x{2064}~x{206A}-~x{206F}~x{FEFF}~x{FFF9}-~x{FFFB}]',
                                 '~', CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin)) THEN
    BEGIN
      DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
        CASE
            WHEN (p_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer'
            WHEN (CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters'
            WHEN p_claimed_by IS NULL OR CHAR_LENGTH(p_claimed_by) < 1 OR CHAR_LENGTH(p_claimed_by) > 191 THEN
              '45007: claimed_by must be 1 to 191 characters'
            WHEN p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN '45007: lease_seconds must be 1 to 86400'
            WHEN p_claimed_by REGEXP REPLACE(
                                       '[~x{0}-~x{1F}~x{7F}-~x{9F}~x{2028}~x{2029}~x{202A}-~x{202E}~x{2066}-~x{2069}~x{200E}~x{200F}~x{61C}~x{AD}~x{180E}~x{200B}~x{2060}-~x{2064}~x{206A}-~x{206F}~x{FEFF}~x{FFF9}-~x{FFFB}]',
                                       '~', CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin) THEN
              '45010: claimed_by must not contain control characters, line or paragraph separators, bidi formatting or invisible format characters'
          END;
      -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
      -- expression): one variable, as every variable is paid for on every call.
      CASE LEFT(v_refusal, 5)
        WHEN '45007' THEN
          SET v_refusal = CONCAT('email_try_claim', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
        WHEN '45010' THEN
          SET v_refusal = CONCAT('email_try_claim', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
        ELSE
          SET v_refusal = CONCAT('email_try_claim', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_refusal;
      END CASE;
    END;
  END IF;
  -- The row's tenant, by a consistent read that locks nothing (a shared lock on the tenant's row met
  -- the batch claims' updates of it in deadlocks): a pause committed before this call is seen; one
  -- committed meanwhile is as if it came just after this claim, as for a batch claim.
  -- A tenant with a send rate or a daily quota (v_limited) whose claimable row this read finds is
  -- checked again under the locks below; any other call takes none of them.
  SELECT COUNT(*), MAX(t.id), MAX(t.send_rate IS NOT NULL OR t.daily_quota IS NOT NULL)
    INTO v_tenant_allows, v_tenant, v_limited
    FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
         STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id
   WHERE a.id = p_id
     AND a.claim_due_at <= v_now
         AND a.attempt_count < a.max_attempts
     AND t.paused_reason IS NULL
         AND a.claim_queue_rank <= IF(t.guard_below_priority IS NULL, 9, 9 - t.guard_below_priority)
         AND IF(t.daily_quota IS NULL, 1,
                GREATEST(0, t.daily_quota - IF((t.day_started_at IS NULL OR t.day_started_at <= v_now - INTERVAL 1 DAY), 0, t.day_count))) >= 1
         AND (t.send_rate IS NULL
              OR GREATEST(0, FLOOR(TIMESTAMPDIFF(MICROSECOND, IF(t.send_rate IS NULL, NULL,
                                                                 GREATEST(COALESCE(t.rate_next_at, v_now - INTERVAL 1 DAY),
                                                                          v_now - INTERVAL ROUND(GREATEST(1, 1 / t.send_rate) * 1000000) MICROSECOND)), v_now) / 1000000 * t.send_rate)) >= 1);
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1568 SET v_own = 0;
    SET v_own = 1;
    SET TRANSACTION READ WRITE;
  END;
  IF v_own = 1 THEN
    START TRANSACTION;
  ELSE
    SAVEPOINT email_outbox_call;
  END IF;
  IF v_limited = 1 THEN
    -- The batch claims' order: the schedule's clock, then the tenant's row. Two claims of one tenant
    -- never both take its last send; the tenant's row read afresh (a locking read) under the clock.
    SELECT virtual_time INTO v_clock FROM email_tenant_schedule WHERE id = 1 FOR UPDATE;
    SELECT COUNT(*) INTO v_tenant_allows
      FROM email_tenants t FORCE INDEX (PRIMARY)
     WHERE t.id = v_tenant
       AND t.paused_reason IS NULL
           AND 0 <= IF(t.guard_below_priority IS NULL, 9, 9 - t.guard_below_priority)
           AND IF(t.daily_quota IS NULL, 1,
                  GREATEST(0, t.daily_quota - IF((t.day_started_at IS NULL OR t.day_started_at <= v_now - INTERVAL 1 DAY), 0, t.day_count))) >= 1
           AND (t.send_rate IS NULL
                OR GREATEST(0, FLOOR(TIMESTAMPDIFF(MICROSECOND, IF(t.send_rate IS NULL, NULL,
                                                                   GREATEST(COALESCE(t.rate_next_at, v_now - INTERVAL 1 DAY),
                                                                            v_now - INTERVAL ROUND(GREATEST(1, 1 / t.send_rate) * 1000000) MICROSECOND)), v_now) / 1000000 * t.send_rate)) >= 1)
       FOR UPDATE;
  END IF;
  -- A row to a suppressed address ends Failed instead of being claimed (the claim then matches 0).
  CALL email_internal_fail_if_suppressed(p_id, v_now, p_claimed_by, v_suppressed);
  -- A row past its expires_at ends Failed ('Expired') instead of being claimed (the claim then matches 0).
  BEGIN
    -- No such row is an answer (nothing changed), not a condition for the caller.
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SET v_expired_from = NULL;
    -- First a plain read, which locks nothing: a row that is being sent, or finished, is left without a
    -- lock, so a caller whose transaction stays open after a call that changed nothing holds up no
    -- worker's finalize (issue 37). Only a row that may change is locked and read again. (A caller
    -- whose snapshot is older than the row's start still locks it; the worker waits on such a lock for
    -- its short lock wait timeout only.)
    SELECT status INTO v_expired_from
      FROM email_delivery_attempts FORCE INDEX (PRIMARY)
     WHERE id = p_id
       AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL));
    IF v_expired_from IS NOT NULL THEN
      SET v_expired_from = NULL;
      SELECT status INTO v_expired_from
        FROM email_delivery_attempts FORCE INDEX (PRIMARY)
       WHERE id = p_id
         AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL))
         AND (expires_at <= v_now)
         FOR UPDATE;
      IF v_expired_from IS NOT NULL THEN
        -- The row is ours until commit: its event reads the claim token and the expiry first, then the
        -- change clears the claim.
        INSERT INTO email_delivery_events
          (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
        SELECT id, v_now, status, 'Failed', claim_token, p_claimed_by, SESSION_USER(), CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC')
          FROM email_delivery_attempts FORCE INDEX (PRIMARY)
         WHERE id = p_id;
        UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
           SET status = 'Failed',
               last_error_code = 'Expired',
               last_error_message = LEFT(CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC'), 8000),
               claim_token = NULL,
               lease_expires_at = NULL,
               claimed_from_status = NULL,
               reserved_at = NULL,
               row_version = row_version + 1,
               updated_at = v_now
         WHERE id = p_id;
      END IF;
    END IF;
  END;
  UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
     SET a.claimed_from_status = a.status,
         a.status = 'Processing',
         a.claim_token = p_claim_token,
         a.claimed_by = p_claimed_by,
         a.claimed_at = v_now,
         a.lease_expires_at = v_now + INTERVAL p_lease_seconds SECOND,
         a.reserved_at = NULL,
         a.row_version = a.row_version + 1,
         a.updated_at = v_now
   WHERE a.id = p_id
     AND a.claim_due_at <= v_now
         AND a.attempt_count < a.max_attempts
     AND v_tenant_allows = 1;
  SET v_affected = ROW_COUNT();
  IF v_affected = 1 THEN
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT a.id, v_now, a.claimed_from_status, 'Processing', p_claim_token, p_claimed_by, SESSION_USER(), 'claimed'
      FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
     WHERE a.id = p_id;
    CALL email_internal_drop_suppressed_row(p_id);
    IF v_limited = 1 THEN
      UPDATE email_tenants t FORCE INDEX (PRIMARY)
         SET t.rate_next_at = IF(t.send_rate IS NULL, t.rate_next_at,
                                         IF(t.send_rate IS NULL, NULL,
                                            GREATEST(COALESCE(t.rate_next_at, v_now - INTERVAL 1 DAY),
                                                     v_now - INTERVAL ROUND(GREATEST(1, 1 / t.send_rate) * 1000000) MICROSECOND)) + INTERVAL ROUND(1 / t.send_rate * 1000000) MICROSECOND),
             t.day_count = IF((t.day_started_at IS NULL OR t.day_started_at <= v_now - INTERVAL 1 DAY), 0, t.day_count) + 1,
             t.day_started_at = IF((t.day_started_at IS NULL OR t.day_started_at <= v_now - INTERVAL 1 DAY), v_now, t.day_started_at)
       WHERE t.id = v_tenant;
    END IF;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  SELECT v_affected AS affected, a.id, a.notification_id, a.to_address, a.from_address, a.subject,
         a.text_body, a.html_body, a.attempt_count, a.max_attempts, a.lease_expires_at,
         IF(a.id IS NULL, NULL, COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0)) AS body_bytes,
         a.message_options, a.attachment_bytes, t.name AS tenant, t.ses_tenant_name, a.created_at
    FROM (SELECT 1 AS one) x
         LEFT JOIN email_delivery_attempts a FORCE INDEX (PRIMARY)
           ON v_affected = 1 AND a.id = p_id AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
         LEFT JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id;
END
