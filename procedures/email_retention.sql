-- Retention: delete Sent and Failed rows whose final transition (updated_at) is more than
-- older_than_days old, with everything stored for them (audit events, attachments, provider events,
-- provider state; their suppression entries stay, without the reference), ONE BATCH PER CALL: at most
-- batch_size (1 to 1000) rows of the table, in primary-key order, one short transaction, so no lock a
-- claim or a finalize could wait on is held longer than one batch. UnknownOutcome rows are never
-- deleted (they still need a person), nor any row that is not terminal.
-- A run is the calls of one session (connection) with the same arguments: the first call opens a row in
-- email_retention_runs (who, the calling account, when, the cutoff, fixed for the run) and every call
-- continues after the id the last one stopped at, adding its count. Call again while `more` = 1.
-- Idempotency outlives the row: each deleted row leaves a tombstone (the enqueuing account, a keyed
-- hash of its notification_id, email_internal_id_hash, the dates) until keep_ids_days (NULL: 400; at least older_than_days and
-- at least 30) after its final transition; an enqueue of that id meanwhile answers affected 0, attempt_id NULL, and
-- creates nothing. Each call also drops up to batch_size tombstones whose window has passed.
-- Refusals: 45001 (older_than_days, keep_ids_days, batch_size, actor), 45010 (actor's text).
-- Result: deleted, tombstones_expired, more (1: call again), run_id, cutoff.
CREATE PROCEDURE email_retention(
  IN p_older_than_days BIGINT,
  IN p_keep_ids_days BIGINT,
  IN p_batch_size BIGINT,
  IN p_actor TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_keep BIGINT DEFAULT COALESCE(p_keep_ids_days, 400);
  DECLARE v_run BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_cutoff DATETIME(6) DEFAULT NULL;
  DECLARE v_last BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_start BIGINT UNSIGNED DEFAULT 0;
  -- The end of the id range this call covered: up to the next row it did not reach.
  DECLARE v_through BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_account VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_notification_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_id_hash BINARY(32);
  DECLARE v_key_id SMALLINT UNSIGNED;
  DECLARE v_status VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_created DATETIME(6);
  DECLARE v_updated DATETIME(6);
  DECLARE v_scanned BIGINT DEFAULT 0;
  DECLARE v_young INT DEFAULT 0;
  DECLARE v_end INT DEFAULT 0;
  DECLARE v_deleted BIGINT DEFAULT 0;
  DECLARE v_expired BIGINT DEFAULT 0;
  DECLARE v_more INT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_message VARCHAR(200) CHARACTER SET utf8mb4;
  -- The next batch_size rows by primary key: a consistent read, so nothing is locked but the rows
  -- that are deleted (a locking scan would also lock the live rows between them).
  DECLARE c_window CURSOR FOR
    SELECT id, COALESCE(account, ''), notification_id, status, created_at, updated_at
      FROM email_delivery_attempts FORCE INDEX (PRIMARY)
     WHERE id > v_start
     ORDER BY id
     LIMIT p_batch_size;
  -- The rows this call's delete removed whose id must stay a duplicate a while yet.
  DECLARE c_deleted CURSOR FOR
    SELECT account, notification_id, final_at FROM email_retention_ids
     WHERE DATE(final_at + INTERVAL v_keep DAY) >= DATE(v_now);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;

  IF p_older_than_days IS NULL OR p_older_than_days < 0 OR p_older_than_days > 36500 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_retention: older_than_days must be 0 to 36500';
  END IF;
  -- Under 30 days a retried enqueue (a queue's redelivery, a client's retry after a timeout) could
  -- outlive its id and send the email again: idempotency is not something retention may turn off.
  IF v_keep < GREATEST(p_older_than_days, 30) OR v_keep > 36500 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT =
      'email_retention: keep_ids_days must be NULL (400) or from older_than_days (and at least 30) to 36500';
  END IF;
  IF p_batch_size IS NULL OR p_batch_size < 1 OR p_batch_size > 1000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_retention: batch_size must be 1 to 1000';
  END IF;
  CALL email_internal_check_name('email_retention', 'actor', p_actor, 191);

  CREATE TEMPORARY TABLE IF NOT EXISTS email_retention_ids (
    id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    account VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    notification_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
    final_at DATETIME(6) NOT NULL
  ) ENGINE = MEMORY;
  DELETE FROM email_retention_ids;

  CALL email_internal_begin(v_own);
  -- This session's run, if it is still going with the same arguments; a new one otherwise.
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_run = NULL;
    SELECT id, cutoff, last_id INTO v_run, v_cutoff, v_start
      FROM email_retention_runs
     WHERE id = @email_outbox_retention_run AND connection_id = CONNECTION_ID() AND finished_at IS NULL
       AND actor = p_actor COLLATE utf8mb4_bin AND older_than_days = p_older_than_days AND keep_ids_days = v_keep
       FOR UPDATE;
  END;
  IF v_run IS NULL THEN
    SET v_cutoff = v_now - INTERVAL p_older_than_days DAY, v_start = 0;
    INSERT INTO email_retention_runs
      (started_at, last_batch_at, actor, db_account, connection_id, older_than_days, keep_ids_days, cutoff)
    VALUES (v_now, v_now, p_actor, SESSION_USER(), CONNECTION_ID(), p_older_than_days, v_keep, v_cutoff);
    SET v_run = LAST_INSERT_ID();
    SET @email_outbox_retention_run = v_run;
  END IF;
  SET v_last = v_start;

  OPEN c_window;
  scan: LOOP
    FETCH c_window INTO v_id, v_account, v_notification_id, v_status, v_created, v_updated;
    IF v_end = 1 THEN
      LEAVE scan;
    END IF;
    -- Ids grow with creation time and a row's final transition comes after its creation: past the
    -- first row created after the cutoff nothing is old enough, so the run ends there.
    IF v_created >= v_cutoff THEN
      SET v_young = 1, v_through = v_id - 1;
      LEAVE scan;
    END IF;
    SET v_scanned = v_scanned + 1, v_last = v_id;
    IF v_status IN ('Sent', 'Failed') AND v_updated < v_cutoff THEN
      INSERT INTO email_retention_ids (id, account, notification_id, final_at)
      VALUES (v_id, v_account, v_notification_id, v_updated);
    END IF;
  END LOOP;
  CLOSE c_window;
  SET v_through = CASE WHEN v_young = 1 THEN v_through
                       WHEN v_end = 1 THEN 18446744073709551615
                       ELSE v_last END;

  -- The rows, fenced again by status and age (by primary key: record locks only). A row that changed
  -- while this call waited on its lock (redriven, erased) no longer matches and stays whole, and so
  -- does a row another run deleted first: from here on the list holds only the rows this delete
  -- removed, and only those lose their children and get a tombstone.
  DELETE a FROM email_retention_ids x
    STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = x.id
   WHERE a.status IN ('Sent', 'Failed') AND a.updated_at < v_cutoff;
  SET v_deleted = ROW_COUNT();
  IF v_deleted < (SELECT COUNT(*) FROM email_retention_ids) THEN
    DELETE x FROM email_retention_ids x
     WHERE EXISTS (SELECT 1 FROM email_delivery_attempts a FORCE INDEX (PRIMARY) WHERE a.id = x.id);
  END IF;

  -- Tombstones in the same transaction: an enqueue whose insert waited for this delete finds them.
  -- Keyed by the row's enqueuing account: notification ids are per account (email_internal_enqueue).
  -- Each id kept by its keyed hash (email_internal_id_hash), which a guess of the id does not confirm.
  SET v_end = 0;
  OPEN c_deleted;
  tombstones: LOOP
    FETCH c_deleted INTO v_account, v_notification_id, v_updated;
    IF v_end = 1 THEN
      LEAVE tombstones;
    END IF;
    CALL email_internal_id_hash(v_notification_id, v_key_id, v_id_hash);
    INSERT INTO email_notification_tombstones (account, id_hash, key_id, deleted_on, keep_until)
    VALUES (v_account, v_id_hash, v_key_id, DATE(v_now), DATE(v_updated + INTERVAL v_keep DAY))
    ON DUPLICATE KEY UPDATE keep_until = GREATEST(keep_until, VALUES(keep_until)), deleted_on = VALUES(deleted_on);
  END LOOP;
  CLOSE c_deleted;

  DELETE e FROM email_retention_ids x STRAIGHT_JOIN email_delivery_events e ON e.attempt_id = x.id;
  DELETE t FROM email_retention_ids x STRAIGHT_JOIN email_attachments t ON t.attempt_id = x.id;
  DELETE p FROM email_retention_ids x STRAIGHT_JOIN email_provider_events p ON p.attempt_id = x.id;
  DELETE s FROM email_retention_ids x STRAIGHT_JOIN email_delivery_status s ON s.attempt_id = x.id;
  -- After the events: a feed position given to one of them meanwhile (email_changes) goes too.
  DELETE f FROM email_retention_ids x STRAIGHT_JOIN email_changes_feed f ON f.attempt_id = x.id;
  -- The address stays suppressed; only its pointer to the deleted email goes.
  UPDATE email_retention_ids x STRAIGHT_JOIN email_suppressed_addresses s ON s.attempt_id = x.id
     SET s.attempt_id = NULL, s.provider_event_id = NULL;

  -- An SES event the consumer matched to one of these rows just before the delete and recorded just
  -- after it would point at nothing: whatever in the id range this call covered points at no row goes
  -- too (the next run catches one recorded after this batch), by the attempt_id indexes.
  DELETE p FROM email_provider_events p
   WHERE p.attempt_id > v_start AND p.attempt_id <= v_through
     AND NOT EXISTS (SELECT 1 FROM email_delivery_attempts a WHERE a.id = p.attempt_id);
  DELETE s FROM email_delivery_status s
   WHERE s.attempt_id > v_start AND s.attempt_id <= v_through
     AND NOT EXISTS (SELECT 1 FROM email_delivery_attempts a WHERE a.id = s.attempt_id);
  UPDATE email_suppressed_addresses s SET s.attempt_id = NULL, s.provider_event_id = NULL
   WHERE s.attempt_id > v_start AND s.attempt_id <= v_through
     AND NOT EXISTS (SELECT 1 FROM email_delivery_attempts a WHERE a.id = s.attempt_id);

  DELETE FROM email_notification_tombstones WHERE keep_until < DATE(v_now) ORDER BY keep_until LIMIT p_batch_size;
  SET v_expired = ROW_COUNT();

  SET v_more = IF((v_scanned = p_batch_size AND v_young = 0) OR v_expired = p_batch_size, 1, 0);
  UPDATE email_retention_runs
     SET last_id = v_last, last_batch_at = v_now, batches = batches + 1,
         deleted_rows = deleted_rows + v_deleted, tombstones_expired = tombstones_expired + v_expired,
         finished_at = IF(v_more = 1, NULL, v_now)
   WHERE id = v_run;
  CALL email_internal_end(v_own);
  DELETE FROM email_retention_ids;
  SELECT v_deleted AS deleted, v_expired AS tombstones_expired, v_more AS more, v_run AS run_id, v_cutoff AS cutoff;
END
