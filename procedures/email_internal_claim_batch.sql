-- Internal: the claim behind email_internal_claim_rows (every batch claim). Sweeps stale leases and
-- expired rows, then claims up to p_limit due rows, highest priority first, then oldest due, for one
-- worker in one short transaction, with one audit event per
-- row, and leaves their ids in the session's temporary table email_claim_batch_rows for the caller's
-- result set. Concurrent callers never wait on each other's rows (FOR UPDATE SKIP LOCKED) and never
-- share a row. Commits its own transaction. p_reserve 1: the rows are reservations (reserved_at set:
-- their sends have not started; see email_reserve_batch); 0: claimed as started.
CREATE PROCEDURE email_internal_claim_batch(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT,
  IN p_reserve TINYINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6);
  DECLARE v_swept BIGINT DEFAULT 0;
  DECLARE v_expired BIGINT DEFAULT 0;
  DECLARE v_message VARCHAR(200) CHARACTER SET utf8mb4;
  -- The ranks that hold a due row (NULL: none), found before the claim's transaction: see below.
  DECLARE v_rank0, v_rank1, v_rank2, v_rank3, v_rank4, v_rank5, v_rank6, v_rank7, v_rank8, v_rank9 TINYINT DEFAULT NULL;
  -- Not a swallowing handler: it ends the transaction and re-raises the same error.
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;

  CALL email_internal_check_token(p_where, p_claim_token);
  IF p_claimed_by IS NULL OR CHAR_LENGTH(p_claimed_by) < 1 OR CHAR_LENGTH(p_claimed_by) > 191 THEN
    SET v_message = CONCAT(p_where, ': claimed_by must be 1 to 191 characters');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_message;
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    SET v_message = CONCAT(p_where, ': lease_seconds must be 1 to 86400');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_message;
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    SET v_message = CONCAT(p_where, ': limit must be 1 to 10000');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_text(p_where, 'claimed_by', p_claimed_by, 'text');

  CALL email_internal_sweep_stale_leases(p_limit, v_swept);
  CALL email_internal_expire_overdue(p_limit, 'expiry-sweep', v_expired);

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

  -- Which ranks hold a due row, by a consistent read that locks nothing, on the index that ranks every
  -- row (ix_..._claim_order): there a rank with nothing due ends at once on the next rank's first
  -- terminal or in-flight entry, where the locking scan below, on the index of claimable rows only,
  -- would walk the next rank's run of entries InnoDB has marked deleted but not yet purged, once for
  -- every empty rank (measured, database only: 0.73 ms of CPU per email without this read, 0.39 with
  -- it). A row that becomes due at another rank meanwhile waits for the next claim. Before the SET
  -- TRANSACTION below, which is for the claim's own transaction.
  SET v_now = UTC_TIMESTAMP(6);
  SELECT (SELECT 0 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 0 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 1 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 1 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 2 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 2 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 3 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 3 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 4 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 4 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 5 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 5 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 6 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 6 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 7 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 7 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 8 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 8 AND claim_due_at <= v_now LIMIT 1),
         (SELECT 9 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)
           WHERE claim_rank = 9 AND claim_due_at <= v_now LIMIT 1)
    INTO v_rank0, v_rank1, v_rank2, v_rank3, v_rank4, v_rank5, v_rank6, v_rank7, v_rank8, v_rank9;

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
  INSERT INTO email_claim_batch_rows (id, from_status)
  SELECT id, status
    FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_queue)
   -- Highest priority first (claim_queue_rank = 9 - priority), then the oldest due: one range per
   -- rank. Only claimable rows have a rank, so no range ends on a terminal row that retention may be
   -- deleting (migration 0015).
   WHERE claim_queue_rank IN (v_rank0, v_rank1, v_rank2, v_rank3, v_rank4, v_rank5, v_rank6, v_rank7, v_rank8, v_rank9)
     AND claim_due_at <= v_now
     AND attempt_count < max_attempts
   ORDER BY claim_queue_rank, claim_due_at, id
   LIMIT p_limit
   FOR UPDATE SKIP LOCKED;
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
         a.reserved_at = IF(p_reserve = 1, v_now, NULL),
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
  COMMIT;
END
