-- The claim, once, for every batch claim (email_claim_batch, email_claim_batch_bounded,
-- email_reserve_batch): sweeps stale leases and expired rows, then claims up to {{limit}} due rows for
-- one worker in one short transaction: shared among the tenants with due rows in proportion to their
-- weights, within their limits (paused, send rate, daily quota, reputation guard), and within a tenant
-- highest priority first, then oldest due (docs/design.md, "Tenants"); with one audit event per row;
-- then returns them in the claim row shape (claim_row_columns, bodies up to {{max_inline}} bytes).
-- Concurrent callers never wait on each other's rows (FOR UPDATE SKIP LOCKED) and never share a row.
-- Commits its own transaction (call it with autocommit on). {{reserve}} 1: the rows are reservations
-- (reserved_at set: their sends have not started; see email_reserve_batch); 0: claimed as started.
-- A block of its own: its variables and its handler are its own.
BEGIN
  DECLARE v_now DATETIME(6);
  -- What a sweep ended (not read: every variable is paid for on every call, so the two share one).
  DECLARE v_swept BIGINT DEFAULT 0;
  DECLARE v_found, v_stale, v_overdue INT DEFAULT 0;
  DECLARE v_pick INT UNSIGNED DEFAULT 0;
  -- Not a swallowing handler: it ends the transaction and re-raises the same error.
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  {{>refuse | where = {{where}} | refusal = CASE
    WHEN {{max_inline}} IS NULL OR {{max_inline}} < 0 THEN '45001: max_inline_body_bytes must be 0 or more'
    {{>claim_refusals | token = {{token}} | claimed_by = {{claimed_by}} | lease = {{lease}} | more_refusals = WHEN {{limit}} IS NULL OR {{limit}} < 1 OR {{limit}} > 10000 THEN '45001: limit must be 1 to 10000'}}
  END}}

  -- The sweeps, each called only when a consistent read that locks nothing finds it work to do: most
  -- claims find none, and a call with its cursor would cost more than the probe. (SELECT ... INTO: a
  -- subquery of an IF or a SET takes shared locks, see below.)
  SET v_now = UTC_TIMESTAMP(6);
  SELECT EXISTS (SELECT 1 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_lease)
                  WHERE {{>stale_lease | now = v_now}}),
         EXISTS (SELECT 1 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_expiry)
                  WHERE {{>expired_unsent | now = v_now}})
    INTO v_stale, v_overdue;
  IF v_stale = 1 THEN
    CALL email_internal_sweep_stale_leases({{limit}}, v_swept);
  END IF;
  IF v_overdue = 1 THEN
    CALL email_internal_expire_overdue({{limit}}, 'expiry-sweep', v_swept);
  END IF;

  -- Anything to claim at all: the first entry of ..._tenant_due, which holds claimable rows only (one
  -- index dive), by a consistent read that locks nothing (SELECT ... INTO, see above), before any
  -- transaction; a claim that finds none makes no working table and takes no lock. Whether one is
  -- due and whose turn it is the walk below finds.
  SELECT MIN(claim_tenant) INTO v_pick
    FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_tenant_due)
   WHERE claim_tenant > 0;

  IF v_pick IS NOT NULL THEN
    SET v_found = 1;
    BEGIN
      -- A block of its own: the variables of a claim that has rows are set up only then. The fair
      -- share (see below): the walk's tenants read and of them those that can take a slot, the most one
      -- read of the walk takes and the most any may, the pass of the last one read, their ids, the
      -- highest weight, whether the walk has read every tenant (1), may go on (0) or is to go on now
      -- (-1), the tenants it met that could not take a slot; the clock, the slots left to claim and to
      -- share out this round, the tenant picked and its figures, the last slot's tag, the lowest second
      -- tag, the tenants given slots this round, a tenant's first row (id * 16 + rank).
      DECLARE v_walked, v_walk_ok, v_batch, v_batch_max, v_idle BIGINT DEFAULT 0;
      DECLARE v_walk_pass DOUBLE DEFAULT 0;
      DECLARE v_walk LONGTEXT;
      DECLARE v_max_weight DOUBLE DEFAULT 1;
      DECLARE v_walk_done INT DEFAULT 0;
      DECLARE v_clock, v_tag, v_next_tag, v_weight, v_last_tag, v_wave DOUBLE;
      DECLARE v_left, v_share, v_room, v_take, v_wanted, v_got BIGINT DEFAULT 0;
      DECLARE v_round, v_claimants INT DEFAULT 0;
      DECLARE v_max_rank TINYINT;
      DECLARE v_top BIGINT UNSIGNED;

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
      -- The tenants the walk found and this claim's share-out among them (a name of its own: a session
      -- keeps its temporary tables, and one made by an earlier release has other columns).
      CREATE TEMPORARY TABLE IF NOT EXISTS email_claim_walk (
        tenant_id INT UNSIGNED NOT NULL PRIMARY KEY,
        weight DOUBLE NOT NULL DEFAULT 1,
        raw_pass DOUBLE NOT NULL DEFAULT 0,
        start_pass DOUBLE NOT NULL DEFAULT 0,
        first_tag DOUBLE NOT NULL DEFAULT 0,
        next_tag DOUBLE NOT NULL DEFAULT 0,
        last_tag DOUBLE NOT NULL DEFAULT 0,
        max_rank TINYINT NOT NULL DEFAULT 9,
        top BIGINT UNSIGNED NULL,
        send_rate DOUBLE NULL,
        rate_start DATETIME(6) NULL,
        day_start DATETIME(6) NULL,
        day_base BIGINT NOT NULL DEFAULT 0,
        room BIGINT NOT NULL DEFAULT 0,
        wanted BIGINT NOT NULL DEFAULT 0,
        got BIGINT NOT NULL DEFAULT 0,
        exhausted TINYINT NOT NULL DEFAULT 0
      ) ENGINE = MEMORY;
      DELETE FROM email_claim_walk;

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
      -- The fair-share clock, locked: concurrent claims share out one schedule, one after the other, and
      -- every pass they write is written holding it, so the walk below reads them as they stand.
      SELECT COALESCE(MAX(virtual_time), 0) INTO v_clock FROM email_tenant_schedule WHERE id = 1 FOR UPDATE;
      -- A read of the walk takes at most this many tenants: they come back in one JSON array, which
      -- MariaDB builds within group_concat_max_len (20 bytes a tenant at most). One that meets only
      -- tenants that cannot take a slot doubles it for the next read, so a run of them costs a few
      -- reads (each read starts again at the last pass read and skips the tenants already read there).
      SET v_batch_max = GREATEST(1, FLOOR(@@SESSION.group_concat_max_len / 20));
      SET v_batch = LEAST({{limit}} + 1, v_batch_max);
      SET v_walk_done = -1;
      -- Up to three rounds: the claim's slots go to the tenants in tag order (stride scheduling: a
      -- tenant's pass moves 1/weight per send; one idle until now starts from the clock, so it never
      -- banks a share; on a tie the one served less so far goes first); a tenant that had fewer due rows
      -- than its slots is done, and the next round shares what it left among the others.
      SET v_left = {{limit}};
      rounds: WHILE v_left > 0 AND v_round < 3 DO
        SET v_round = v_round + 1;
        UPDATE email_claim_walk SET first_tag = next_tag;
        SET v_share = -1;
        share_out: LOOP
          IF v_walk_done = -1 THEN
            -- The next tenants of the walk, lowest pass first, under the clock's lock: the walk is
            -- left once the tenants found cover the slots (below), so a claim reads about as many
            -- tenants as it has slots, whatever the number with due rows. A consistent read that
            -- locks nothing in any isolation (a locking read of ..._tenant_due would wait for an
            -- enqueue's uncommitted row), its ids passed on in one JSON array; with the highest
            -- weight of any tenant (one entry of ix_email_tenants_weight).
            SELECT COUNT(*), COUNT(w.pick), COALESCE(MAX(w.pass), v_walk_pass),
                   JSON_ARRAYAGG(JSON_ARRAY(w.id, w.pick)),
                   (SELECT MAX(weight) FROM email_tenants FORCE INDEX (ix_email_tenants_weight))
              INTO v_walked, v_walk_ok, v_walk_pass, v_walk, v_max_weight
              FROM {{>tenant_walk | now = v_now | from = v_walk_pass | more = NOT EXISTS (SELECT 1 FROM email_claim_walk c WHERE c.tenant_id = t.id) | limit = v_batch}} w;
            SET v_walk_done = IF(v_walked < v_batch, 1, 0), v_idle = v_idle + v_walked - v_walk_ok;
            IF v_walk_ok = 0 THEN
              SET v_batch = LEAST(v_batch * 2, v_batch_max);
            END IF;
            -- Each tenant's next send's tag and the room its limits leave, read again by primary key
            -- under the lock: none while paused; its rate schedule (at most a second's burst); what is
            -- left of its 24 hours. The reputation guard leaves only the ranks at or above its priority.
            INSERT IGNORE INTO email_claim_walk
              (tenant_id, weight, raw_pass, start_pass, first_tag, next_tag, max_rank, top, send_rate,
               rate_start, day_start, day_base, room, exhausted)
            SELECT t.id, t.weight, t.pass, GREATEST(t.pass, v_clock),
                   GREATEST(t.pass, v_clock) + 1 / t.weight, GREATEST(t.pass, v_clock) + 1 / t.weight,
                   {{>tenant_max_rank | tenant = t}}, NULLIF(j.pick, 0),
                   t.send_rate,
                   {{>tenant_rate_start | tenant = t | now = v_now}},
                   {{>tenant_day_start | tenant = t | now = v_now}},
                   {{>tenant_day_base | tenant = t | now = v_now}},
                   IF(t.paused_reason IS NOT NULL, 0,
                      LEAST({{limit}}, {{>tenant_quota_room | tenant = t | now = v_now | limit = {{limit}}}},
                            IF(t.send_rate IS NULL, {{limit}},
                               {{>tenant_rate_room | rate = t.send_rate | rate_start = {{>tenant_rate_start | tenant = t | now = v_now}} | now = v_now}}))),
                   0
              FROM JSON_TABLE(v_walk, '$[*]' COLUMNS (id INT UNSIGNED PATH '$[0]', pick BIGINT UNSIGNED PATH '$[1]')) j
                   STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = j.id
             WHERE j.pick IS NOT NULL;
            IF v_walk_ok < v_walked THEN
              -- A tenant met that cannot take a slot is kept as exhausted 2, no room: the walk does not
              -- read it again and its pass is lifted at the end (below).
              INSERT IGNORE INTO email_claim_walk (tenant_id, exhausted)
              SELECT j.id, 2
                FROM JSON_TABLE(v_walk, '$[*]' COLUMNS (id INT UNSIGNED PATH '$[0]', pick BIGINT UNSIGNED PATH '$[1]')) j
               WHERE j.pick IS NULL;
            END IF;
            IF v_walk_ok = 0 AND v_walk_done = 0 THEN
              -- Nothing new to share out: read on.
              SET v_walk_done = -1;
              ITERATE share_out;
            END IF;
            IF v_share >= 0 THEN
              -- This round's share-out starts again, the tenants just found among the others.
              UPDATE email_claim_walk SET next_tag = first_tag, wanted = 0;
            END IF;
          END IF;
          SET v_share = v_left;
          share: WHILE v_share > 0 DO
            -- The tenant with the lowest tag, its figures, the next tenant's tag and the lowest second
            -- tag of any (its tag plus 1/weight), in one read.
            SET v_pick = NULL;
            SELECT tenant_id, next_tag, weight, room - got - wanted,
                   LEAD(next_tag) OVER (ORDER BY next_tag, raw_pass, tenant_id),
                   MIN(next_tag + 1 / weight) OVER ()
              INTO v_pick, v_tag, v_weight, v_room, v_next_tag, v_wave
              FROM email_claim_walk WHERE exhausted = 0 AND room > got + wanted
             ORDER BY next_tag, raw_pass, tenant_id LIMIT 1;
            IF v_pick IS NULL THEN
              LEAVE share;
            END IF;
            -- As many slots as keep its tag at or below the next tenant's: one statement per run, not
            -- per slot. A run of one among several tenants is a wave instead: one slot to each tenant
            -- whose tag is at or below the lowest second tag, lowest tags first (when many tenants
            -- share a claim, one statement for them all).
            SET v_take = LEAST(v_share, v_room,
                               IF(v_next_tag IS NULL, v_share, FLOOR((v_next_tag - v_tag) * v_weight) + 1));
            IF v_take = 1 AND v_next_tag IS NOT NULL THEN
              UPDATE email_claim_walk
                 SET last_tag = next_tag, wanted = wanted + 1, next_tag = next_tag + 1 / weight
               WHERE exhausted = 0 AND room > got + wanted AND next_tag <= v_wave
               ORDER BY next_tag, raw_pass, tenant_id
               LIMIT v_share;
              SET v_take = ROW_COUNT();
            ELSE
              UPDATE email_claim_walk
                 SET last_tag = next_tag + (v_take - 1) / weight, wanted = wanted + v_take,
                     next_tag = next_tag + v_take / weight
               WHERE tenant_id = v_pick;
            END IF;
            SET v_share = v_share - v_take;
          END WHILE;
          -- The tenants given slots and the last slot's tag.
          SELECT COUNT(*), MAX(last_tag) INTO v_claimants, v_last_tag FROM email_claim_walk WHERE wanted > 0;
          -- The tenants found cover the slots unless the walk may hold more and a slot went unhanded, or
          -- the last slot's tag is past the lowest a tenant not yet read could have: its pass is at or
          -- above the last one read (passes only grow, and only under the clock's lock), and its first
          -- tag 1/weight above it (on an equal tag, the one read first goes first).
          IF v_walk_done = 0
             AND (v_share > 0 OR v_last_tag > GREATEST(v_walk_pass, v_clock) + 1 / v_max_weight) THEN
            SET v_walk_done = -1;
            ITERATE share_out;
          END IF;
          LEAVE share_out;
        END LOOP;
        IF v_share = v_left THEN
          LEAVE rounds;
        END IF;

        -- Each tenant's rows, highest priority first, then the oldest due, on ..._tenant_queue, which
        -- holds claimable rows only, so no range ends on a terminal row that retention may be deleting.
        -- The tenant with the earliest tag first, so its rows lead the batch. The walk read each
        -- tenant's first row there (its highest priority, oldest due) and kept it when due (top: its id
        -- and rank). When every tenant given slots in the first round has one, as when many tenants
        -- share a claim, those rows are locked by primary key in one statement; a tenant whose row is
        -- gone meanwhile is read as below. Else each tenant is read on its own: one range, its highest
        -- priority's due rows, in the first round (each range costs the optimizer an index read to
        -- estimate it), then, for what that left, one range per rank of its own, so no range reads rows
        -- that are not due yet. INSERT IGNORE: a later read of a tenant's rows starts from its first
        -- again, and those this transaction already holds are in the list.
        IF v_round = 1 AND v_claimants = v_left - v_share THEN
          INSERT IGNORE INTO email_claim_batch_rows (id, from_status)
          SELECT a.id, a.status
            FROM email_claim_walk c
                 STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.top DIV 16
           WHERE c.wanted > 0
             AND a.claim_tenant = c.tenant_id
             AND a.claim_queue_rank <= c.max_rank
             AND {{>claimable | now = v_now}}
           ORDER BY c.first_tag, c.raw_pass, c.tenant_id
           FOR UPDATE SKIP LOCKED;
          SET v_got = ROW_COUNT();
          IF v_got > 0 THEN
            UPDATE email_claim_walk c STRAIGHT_JOIN email_claim_batch_rows r ON r.id = c.top DIV 16
               SET c.got = c.got + 1, c.wanted = 0
             WHERE c.wanted > 0;
            SET v_left = v_left - v_got, v_claimants = v_claimants - v_got;
          END IF;
        END IF;
        claim_tenants: WHILE v_claimants > 0 DO
          SELECT tenant_id, got + wanted, wanted, max_rank, IF(v_round = 1 AND got = 0, top, NULL)
            INTO v_pick, v_take, v_wanted, v_max_rank, v_top
            FROM email_claim_walk WHERE wanted > 0
           ORDER BY first_tag, raw_pass, tenant_id LIMIT 1;
          SET v_got = 0;
          IF v_top MOD 16 <= v_max_rank THEN
            INSERT IGNORE INTO email_claim_batch_rows (id, from_status)
            SELECT a.id, a.status
              FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_tenant_queue)
             WHERE a.claim_tenant = v_pick
               AND a.claim_queue_rank = v_top MOD 16
               AND {{>claimable | now = v_now}}
             ORDER BY a.claim_queue_rank, a.claim_due_at, a.id
             LIMIT v_take
             FOR UPDATE SKIP LOCKED;
            SET v_got = ROW_COUNT();
          END IF;
          IF v_got < v_wanted THEN
            INSERT IGNORE INTO email_claim_batch_rows (id, from_status)
            SELECT a.id, a.status
              FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_tenant_queue)
             WHERE a.claim_tenant = v_pick
               AND a.claim_queue_rank IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
               AND a.claim_queue_rank <= v_max_rank
               AND {{>claimable | now = v_now}}
             ORDER BY a.claim_queue_rank, a.claim_due_at, a.id
             LIMIT v_take
             FOR UPDATE SKIP LOCKED;
            SET v_got = v_got + ROW_COUNT();
          END IF;
          UPDATE email_claim_walk
             SET got = got + v_got, exhausted = IF(v_got < v_wanted, 1, 0), wanted = 0
           WHERE tenant_id = v_pick;
          SET v_left = v_left - v_got, v_claimants = v_claimants - 1;
        END WHILE;
      END WHILE;

      -- A row past its expires_at ends Failed ('Expired') here instead of being claimed.
      {{>fail_expired_claims | now = v_now | actor = {{claimed_by}}}}
      -- A row to a suppressed address ends Failed here instead of being claimed.
      {{>fail_suppressed_claims | now = v_now | actor = {{claimed_by}}}}
      {{>drop_suppressed_claims}}

      -- Multi-table UPDATE assigns in no guaranteed order, so the claimed-from status comes from the
      -- locked read, not from the column being overwritten.
      UPDATE email_claim_batch_rows c
             STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
         SET {{>claim_changes | from_status = c.from_status | token = {{token}} | claimed_by = {{claimed_by}} | now = v_now | lease = {{lease}} | reserved_at = IF({{reserve}} = 1, v_now, NULL)}}
       WHERE a.status IN ('Pending', 'Retrying');
      -- The batch form of email_internal_record_event: one statement for every claimed row, in the
      -- claim's transaction. It reads the in-memory id list only, never the attempts table.
      INSERT INTO email_delivery_events
        (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
      SELECT {{>claimed_event | id = c.id | now = v_now | from_status = c.from_status | token = {{token}} | claimed_by = {{claimed_by}}}}
        FROM email_claim_batch_rows c
       ORDER BY c.id;

      -- The schedule moves on by what each tenant was given: its pass by claimed/weight, its rate
      -- schedule by claimed/rate, its day's count; the clock to the lowest pass of the tenants that had
      -- due rows and room (served this time or not: a tenant left out of a small claim keeps its place),
      -- so a tenant that comes back starts level with the least served of them, no further back. The
      -- tenants the walk did not reach are at or above the last one it read, so the clock goes no
      -- further. Not a tenant that was offered slots and had no row to take (every due row held by its
      -- reputation guard, or locked): it would hold the clock back claim after claim, and a tenant
      -- coming back would bank a share of all that time.
      UPDATE email_claim_walk c STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = c.tenant_id
         SET t.pass = c.start_pass + c.got / c.weight,
             {{>tenant_take | tenant = t | rate = c.send_rate | rate_start = c.rate_start | day_start = c.day_start | day_base = c.day_base | got = c.got}}
       WHERE c.got > 0;
      UPDATE email_tenant_schedule
         SET virtual_time = GREATEST(virtual_time,
                                     COALESCE((SELECT LEAST(MIN(start_pass + got / weight),
                                                            IF(v_walk_done = 1, MIN(start_pass + got / weight),
                                                               GREATEST(v_walk_pass, v_clock)))
                                                 FROM email_claim_walk
                                                WHERE room > 0 AND (got > 0 OR exhausted = 0)), 0))
       WHERE id = 1;
      -- A tenant the walk met that could not take a slot (no due row, or no room: paused, at its rate or
      -- quota) has its pass lifted to just below the lowest this claim gave a served tenant: left
      -- below, it would be read by every claim, however long it stays so; lifted, it sorts after the
      -- tenants still waiting, and the walk meets it again once they have had their turn, about once a
      -- round. Only when tenants are left waiting (the walk stopped short of the last tenant, or one it
      -- found was not served): with none, the next claim would read the lifted tenant all the same, and
      -- a write costs more than that read. Only ever up, so it banks no share; one that gets rows starts
      -- level with the least served of this claim, ahead of it on a tie (docs/design.md, "Tenants").
      IF v_idle > 0 AND (v_walk_done = 0 OR EXISTS (SELECT 1 FROM email_claim_walk
                                                     WHERE room > 0 AND got = 0 AND exhausted = 0)) THEN
        SELECT GREATEST(v_clock, COALESCE(MIN(start_pass + got / weight) - 1 / (1024 * v_max_weight), 0))
          INTO v_tag FROM email_claim_walk WHERE got > 0;
        UPDATE email_claim_walk c STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = c.tenant_id
           SET t.pass = v_tag
         WHERE c.exhausted = 2 AND t.pass < v_tag;
      END IF;
      COMMIT;
    END;
  END IF;
  -- The rows this claim token now holds, in the claim's order (each tenant's highest priority first,
  -- then the oldest due); none when nothing was due (the same columns, from no row).
  IF v_found = 1 THEN
    SELECT {{>claim_row_columns | max_inline = {{max_inline}}}}
      FROM email_claim_batch_rows c FORCE INDEX (ix_seq)
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
           LEFT JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id
     WHERE a.claim_token = {{token}} COLLATE utf8mb4_bin
       AND a.status = 'Processing'
     ORDER BY c.seq;
  ELSE
    SELECT {{>claim_row_columns | max_inline = {{max_inline}}}}
      FROM email_delivery_attempts a
           LEFT JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id
     WHERE FALSE;
  END IF;
END;
