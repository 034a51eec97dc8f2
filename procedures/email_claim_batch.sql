-- Sweep stale leases, then claim up to p_limit due rows for one worker in one short transaction.
-- Concurrent callers never wait on each other's rows (FOR UPDATE SKIP LOCKED) and never share a row.
-- A row whose to_address is on the suppression list ends Failed ('Suppressed') instead of being
-- claimed; a cc, bcc or other to address suppressed since the enqueue is left out of message_options.
-- Call it with autocommit on: it commits its own transaction. The rows are returned only after the
-- claim has committed, so a caller never holds a row the database does not agree it owns.
-- Result: the claimed rows in the claim row shape (id, notification_id, to_address, from_address,
-- subject, text_body, html_body, attempt_count, max_attempts, lease_expires_at, body_bytes,
-- message_options, attachment_bytes, tenant, ses_tenant_name, created_at), bodies always inline:
-- email_claim_batch_bounded with no bound.
CREATE PROCEDURE email_claim_batch(
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE v_swept BIGINT DEFAULT 0;
    DECLARE v_expired BIGINT DEFAULT 0;
    DECLARE v_found INT DEFAULT 0;
    DECLARE v_stale, v_overdue INT DEFAULT 0;
    -- The fair share (see below): the tenant read last, the next one, the clock, the slots left to
    -- claim and to share out this round, the tenant picked and its figures.
    DECLARE v_tenant, v_next, v_pick INT UNSIGNED DEFAULT 0;
    DECLARE v_clock, v_tag, v_next_tag, v_weight DOUBLE;
    DECLARE v_left, v_share, v_room, v_take, v_wanted, v_got BIGINT DEFAULT 0;
    DECLARE v_round INT DEFAULT 0;
    DECLARE v_due DATETIME(6);
    DECLARE v_max_rank TINYINT;
    -- Not a swallowing handler: it ends the transaction and re-raises the same error.
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
      ROLLBACK;
      RESIGNAL;
    END;
  
    IF ((CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) OR (p_claimed_by IS NULL OR CHAR_LENGTH(p_claimed_by) < 1 OR CHAR_LENGTH(p_claimed_by) > 191) OR (p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400) OR (p_limit IS NULL OR p_limit < 1 OR p_limit > 10000) OR (p_claimed_by REGEXP REPLACE(
                                   '[~x{0}-~x{1F}~x{7F}-~x{9F}~x{2028}~x{2029}~x{202A}-~x{202E}~x{2066}-~x{2069}~x{200E}~x{200F}~x{61C}~x{AD}~x{180E}~x{200B}~x{2060}-~x{2064}~x{206A}-~x{206F}~x{FEFF}~x{FFF9}-~x{FFFB}]',
                                   '~', CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin)) THEN
      BEGIN
        DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
          CASE
              WHEN (CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters'
              WHEN p_claimed_by IS NULL OR CHAR_LENGTH(p_claimed_by) < 1 OR CHAR_LENGTH(p_claimed_by) > 191 THEN
                '45007: claimed_by must be 1 to 191 characters'
              WHEN p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN '45007: lease_seconds must be 1 to 86400'
              WHEN p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN '45001: limit must be 1 to 10000'
              WHEN p_claimed_by REGEXP REPLACE(
                                         '[~x{0}-~x{1F}~x{7F}-~x{9F}~x{2028}~x{2029}~x{202A}-~x{202E}~x{2066}-~x{2069}~x{200E}~x{200F}~x{61C}~x{AD}~x{180E}~x{200B}~x{2060}-~x{2064}~x{206A}-~x{206F}~x{FEFF}~x{FFF9}-~x{FFFB}]',
                                         '~', CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin) THEN
                '45010: claimed_by must not contain control characters, line or paragraph separators, bidi formatting or invisible format characters'
            END;
        -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
        -- expression): one variable, as every variable is paid for on every call.
        CASE LEFT(v_refusal, 5)
          WHEN '45007' THEN
            SET v_refusal = CONCAT('email_claim_batch', SUBSTRING(v_refusal, 6));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
          WHEN '45010' THEN
            SET v_refusal = CONCAT('email_claim_batch', SUBSTRING(v_refusal, 6));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
          ELSE
            SET v_refusal = CONCAT('email_claim_batch', SUBSTRING(v_refusal, 6));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_refusal;
        END CASE;
      END;
    END IF;
  
    -- The sweeps, each called only when a consistent read that locks nothing finds it work to do: most
    -- claims find none, and a call with its cursor would cost more than the probe. (SELECT ... INTO: a
    -- subquery of an IF or a SET takes shared locks, see below.)
    SET v_now = UTC_TIMESTAMP(6);
    SELECT EXISTS (SELECT 1 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_lease)
                    WHERE status = 'Processing' AND lease_expires_at <= v_now),
           EXISTS (SELECT 1 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_expiry)
                    WHERE status IN ('Pending', 'Retrying', 'Processing')
                          AND expires_at <= v_now
                          AND (status <> 'Processing' OR reserved_at IS NOT NULL))
      INTO v_stale, v_overdue;
    IF v_stale = 1 THEN
      CALL email_internal_sweep_stale_leases(p_limit, v_swept);
    END IF;
    IF v_overdue = 1 THEN
      CALL email_internal_expire_overdue(p_limit, 'expiry-sweep', v_expired);
    END IF;
  
    -- The tenants with a due row, by consistent reads that lock nothing, before the claim's transaction:
    -- on ..._tenant_due (claim_tenant, claim_due_at), which holds claimable rows only, two one-entry
    -- reads per tenant with a claimable row (its id, its earliest due time); a tenant with nothing
    -- waiting costs nothing. A row that becomes due meanwhile waits for the next claim.
    discover: LOOP
      -- SELECT ... INTO, not SET ... = (SELECT ...): a subquery of a SET takes shared locks, and those
      -- met the claims' own updates of this index in deadlocks.
      SELECT MIN(claim_tenant) INTO v_next
        FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_tenant_due)
       WHERE claim_tenant > v_tenant;
      IF v_next IS NULL THEN
        LEAVE discover;
      END IF;
      SELECT MIN(claim_due_at) INTO v_due
        FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_tenant_due)
       WHERE claim_tenant = v_next;
      IF v_due <= v_now THEN
        -- The working tables, made on the first due tenant: a claim that finds nothing makes none.
        IF v_found = 0 THEN
        -- seq keeps the claim's order (INSERT ... SELECT ... ORDER BY numbers the rows in it), so the result
        -- set is read in that order through its index instead of sorted: a sort of rows with their bodies
        -- would go through an on-disk temporary table on every claim.
        CREATE TEMPORARY TABLE IF NOT EXISTS email_claim_batch_rows (
          seq BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
          id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
          from_status ENUM('Pending', 'Retrying') NOT NULL,
          KEY ix_seq (seq) USING BTREE
        ) ENGINE = MEMORY;
        DELETE FROM email_claim_batch_rows;
        -- The tenants with a due row and this claim's share-out among them.
        CREATE TEMPORARY TABLE IF NOT EXISTS email_claim_tenants (
          tenant_id INT UNSIGNED NOT NULL PRIMARY KEY,
          weight DOUBLE NOT NULL DEFAULT 1,
          raw_pass DOUBLE NOT NULL DEFAULT 0,
          start_pass DOUBLE NOT NULL DEFAULT 0,
          first_tag DOUBLE NOT NULL DEFAULT 0,
          next_tag DOUBLE NOT NULL DEFAULT 0,
          max_rank TINYINT NOT NULL DEFAULT 9,
          send_rate DOUBLE NULL,
          rate_start DATETIME(6) NULL,
          day_start DATETIME(6) NULL,
          day_base BIGINT NOT NULL DEFAULT 0,
          room BIGINT NOT NULL DEFAULT 0,
          wanted BIGINT NOT NULL DEFAULT 0,
          got BIGINT NOT NULL DEFAULT 0,
          exhausted TINYINT NOT NULL DEFAULT 0
        ) ENGINE = MEMORY;
        DELETE FROM email_claim_tenants;
          SET v_found = 1;
        END IF;
        INSERT INTO email_claim_tenants (tenant_id) VALUES (v_next);
      END IF;
      SET v_tenant = v_next;
    END LOOP;
  
    IF v_found = 1 THEN
      -- READ COMMITTED for this one transaction: the locking scan then takes record locks only, no gap
      -- locks, so claimed rows moving in the claim index and new enqueues never wait on another
      -- claimer's gap (under REPEATABLE READ that deadlocked 8 concurrent claimers).
      -- Statement-based binary logging refuses READ COMMITTED writes to InnoDB (error 1665): there the
      -- claim keeps the session's level and concurrent claimers may meet deadlocks, which the worker retries.
      IF @@GLOBAL.log_bin = 1 AND @@SESSION.binlog_format = 'STATEMENT' THEN
        SET TRANSACTION READ WRITE;
      ELSE
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
      END IF;
      START TRANSACTION;
      -- The fair-share clock, locked: concurrent claims share out one schedule, one after the other.
      SELECT COALESCE(MAX(virtual_time), 0) INTO v_clock FROM email_tenant_schedule WHERE id = 1 FOR UPDATE;
      -- Each tenant's share of this claim: its next send's tag (stride scheduling: a tenant's pass
      -- moves 1/weight per send; one idle until now starts from the clock, so it never banks a
      -- share; on a tie the one served less so far goes first), and the room its limits leave: none
      -- while paused; its rate schedule (at most a second's burst); what is left of its 24 hours. The
      -- reputation guard leaves only the ranks at or above its priority.
      UPDATE email_claim_tenants c STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = c.tenant_id
         SET c.weight = t.weight,
             c.raw_pass = t.pass,
             c.start_pass = GREATEST(t.pass, v_clock),
             c.next_tag = GREATEST(t.pass, v_clock) + 1 / t.weight,
             c.max_rank = IF(t.guard_below_priority IS NULL, 9, 9 - t.guard_below_priority),
             c.send_rate = t.send_rate,
             c.rate_start = IF(t.send_rate IS NULL, NULL,
                               GREATEST(COALESCE(t.rate_next_at, v_now - INTERVAL 1 DAY),
                                        v_now - INTERVAL ROUND(GREATEST(1, 1 / t.send_rate) * 1000000) MICROSECOND)),
             c.day_start = IF((t.day_started_at IS NULL OR t.day_started_at <= v_now - INTERVAL 1 DAY), v_now, t.day_started_at),
             c.day_base = IF((t.day_started_at IS NULL OR t.day_started_at <= v_now - INTERVAL 1 DAY), 0, t.day_count),
             c.room = IF(t.paused_reason IS NOT NULL, 0,
                         LEAST(p_limit, IF(t.daily_quota IS NULL, p_limit,
                                           GREATEST(0, t.daily_quota - IF((t.day_started_at IS NULL OR t.day_started_at <= v_now - INTERVAL 1 DAY), 0, t.day_count)))));
      UPDATE email_claim_tenants
         SET room = LEAST(room, GREATEST(0, FLOOR(TIMESTAMPDIFF(MICROSECOND, rate_start, v_now) / 1000000 * send_rate)))
       WHERE send_rate IS NOT NULL;
  
      -- Up to three rounds: the claim's slots go to the tenants in tag order; a tenant that had fewer
      -- due rows than its slots is done, and the next round shares what it left among the others.
      SET v_left = p_limit;
      rounds: WHILE v_left > 0 AND v_round < 3 DO
        SET v_round = v_round + 1;
        UPDATE email_claim_tenants SET first_tag = next_tag;
        SET v_share = v_left;
        share: WHILE v_share > 0 DO
          SET v_pick = (SELECT tenant_id FROM email_claim_tenants WHERE exhausted = 0 AND room > got + wanted
                         ORDER BY next_tag, raw_pass, tenant_id LIMIT 1);
          IF v_pick IS NULL THEN
            LEAVE share;
          END IF;
          SELECT next_tag, weight, room - got - wanted INTO v_tag, v_weight, v_room
            FROM email_claim_tenants WHERE tenant_id = v_pick;
          SET v_next_tag = (SELECT MIN(next_tag) FROM email_claim_tenants
                             WHERE exhausted = 0 AND room > got + wanted AND tenant_id <> v_pick);
          -- As many slots as keep its tag at or below the next tenant's: one statement per run, not per slot.
          SET v_take = LEAST(v_share, v_room,
                             IF(v_next_tag IS NULL, v_share, FLOOR((v_next_tag - v_tag) * v_weight) + 1));
          UPDATE email_claim_tenants SET wanted = wanted + v_take, next_tag = next_tag + v_take / weight
           WHERE tenant_id = v_pick;
          SET v_share = v_share - v_take;
        END WHILE;
        IF v_share = v_left THEN
          LEAVE rounds;
        END IF;
  
        -- Each tenant's rows, highest priority first, then the oldest due: one range per rank of its own
        -- on ..._tenant_queue, which holds claimable rows only, so no range ends on a terminal row that
        -- retention may be deleting. The tenant with the earliest tag first, so its rows lead the batch.
        -- INSERT IGNORE: a later round reads a tenant's rows from its first again, and those this
        -- transaction already holds are in the list.
        claim_tenants: LOOP
          SET v_pick = (SELECT tenant_id FROM email_claim_tenants WHERE wanted > 0
                         ORDER BY first_tag, raw_pass, tenant_id LIMIT 1);
          IF v_pick IS NULL THEN
            LEAVE claim_tenants;
          END IF;
          SELECT got + wanted, wanted, max_rank INTO v_take, v_wanted, v_max_rank FROM email_claim_tenants WHERE tenant_id = v_pick;
          INSERT IGNORE INTO email_claim_batch_rows (id, from_status)
          SELECT a.id, a.status
            FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_tenant_queue)
           WHERE a.claim_tenant = v_pick
             AND a.claim_queue_rank IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
             AND a.claim_queue_rank <= v_max_rank
             AND a.claim_due_at <= v_now
                 AND a.attempt_count < a.max_attempts
           ORDER BY a.claim_queue_rank, a.claim_due_at, a.id
           LIMIT v_take
           FOR UPDATE SKIP LOCKED;
          SET v_got = ROW_COUNT();
          UPDATE email_claim_tenants
             SET got = got + v_got, exhausted = IF(v_got < v_wanted, 1, 0), wanted = 0
           WHERE tenant_id = v_pick;
          SET v_left = v_left - v_got;
        END LOOP;
      END WHILE;
  
      -- A row past its expires_at ends Failed ('Expired') here instead of being claimed.
      CALL email_internal_fail_expired_claims(v_now, p_claimed_by);
      -- A row to a suppressed address ends Failed here instead of being claimed.
      CALL email_internal_fail_suppressed_claims(v_now, p_claimed_by);
      CALL email_internal_drop_suppressed_claims();
  
      -- Multi-table UPDATE assigns in no guaranteed order, so the claimed-from status comes from the
      -- locked read, not from the column being overwritten.
      UPDATE email_claim_batch_rows c
             STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
         SET a.claimed_from_status = c.from_status,
             a.status = 'Processing',
             a.claim_token = p_claim_token,
             a.claimed_by = p_claimed_by,
             a.claimed_at = v_now,
             a.lease_expires_at = v_now + INTERVAL p_lease_seconds SECOND,
             a.reserved_at = NULL,
             a.row_version = a.row_version + 1,
             a.updated_at = v_now
       WHERE a.status IN ('Pending', 'Retrying');
      -- The batch form of email_internal_record_event: one statement for every claimed row, in the
      -- claim's transaction. It reads the in-memory id list only, never the attempts table.
      INSERT INTO email_delivery_events
        (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
      SELECT c.id, v_now, c.from_status, 'Processing', p_claim_token, p_claimed_by, SESSION_USER(), 'claimed'
        FROM email_claim_batch_rows c
       ORDER BY c.id;
  
      -- The schedule moves on by what each tenant was given: its pass by claimed/weight, its rate
      -- schedule by claimed/rate, its day's count; the clock to the lowest pass of the tenants that had
      -- due rows and room (served this time or not: a tenant left out of a small claim keeps its place),
      -- so a tenant that comes back starts level with the least served of them, no further back. Not a
      -- tenant that was offered slots and had no row to take (every due row held by its reputation
      -- guard, or locked): it would hold the clock back claim after claim, and a tenant coming back
      -- would bank a share of all that time.
      UPDATE email_claim_tenants c STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = c.tenant_id
         SET t.pass = c.start_pass + c.got / c.weight,
             t.rate_next_at = IF(c.send_rate IS NULL, t.rate_next_at,
                                         c.rate_start + INTERVAL ROUND(c.got / c.send_rate * 1000000) MICROSECOND),
             t.day_count = c.day_base + c.got,
             t.day_started_at = c.day_start
       WHERE c.got > 0;
      UPDATE email_tenant_schedule
         SET virtual_time = GREATEST(virtual_time,
                                     COALESCE((SELECT MIN(start_pass + got / weight) FROM email_claim_tenants
                                               WHERE room > 0 AND (got > 0 OR exhausted = 0)), 0))
       WHERE id = 1;
      COMMIT;
    END IF;
    -- The rows this claim token now holds, in the claim's order (each tenant's highest priority first,
    -- then the oldest due); none when nothing was due (the same columns, from no row).
    IF v_found = 1 THEN
      SELECT a.id, a.notification_id, a.to_address, a.from_address, a.subject,
             IF(COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) <= 9223372036854775807, a.text_body, NULL) AS text_body,
             IF(COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) <= 9223372036854775807, a.html_body, NULL) AS html_body,
             a.attempt_count, a.max_attempts, a.lease_expires_at,
             COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) AS body_bytes,
             a.message_options, a.attachment_bytes, t.name AS tenant, t.ses_tenant_name, a.created_at
        FROM email_claim_batch_rows c FORCE INDEX (ix_seq)
             STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
             LEFT JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id
       WHERE a.claim_token = p_claim_token COLLATE utf8mb4_bin
         AND a.status = 'Processing'
       ORDER BY c.seq;
    ELSE
      SELECT a.id, a.notification_id, a.to_address, a.from_address, a.subject,
             IF(COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) <= 9223372036854775807, a.text_body, NULL) AS text_body,
             IF(COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) <= 9223372036854775807, a.html_body, NULL) AS html_body,
             a.attempt_count, a.max_attempts, a.lease_expires_at,
             COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) AS body_bytes,
             a.message_options, a.attachment_bytes, t.name AS tenant, t.ses_tenant_name, a.created_at
        FROM email_delivery_attempts a
             LEFT JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id
       WHERE FALSE;
    END IF;
  END;
END
