-- The feed of what happened to the calling account's own emails, in order: every status change (from
-- the audit, email_delivery_events) and every provider event (delivered, bounced, complained, ...:
-- email_provider_events) after p_after_cursor (0: from the start), at most p_max_rows (1 to 1000).
-- Each change has a cursor; pass the last one seen to continue. A consumer that stops and resumes from
-- its last cursor misses nothing and sees nothing twice: positions are given to events once they are
-- committed (email_internal_sequence_changes), never by the order their ids were taken. The calling
-- account (the database user name, as email_enqueue stores it) sees its own emails only. Called with
-- autocommit it first gives positions to what was committed since the last call; inside a transaction
-- it reads what is already positioned. A change of an email retention has deleted is not returned.
-- Result: one row per change (cursor, attempt_id, notification_id, change 'status' or 'provider',
-- occurred_at, from_status and to_status of a status change, event_type, recipient, kind and subkind
-- of a provider event such as a Bounce with its bounce type and subtype, detail), then one row:
-- next_cursor (the cursor to pass next: the last row's, else after_cursor), more (1: call again now,
-- more changes may be waiting).
CREATE PROCEDURE email_changes(
  IN p_after_cursor BIGINT,
  IN p_max_rows INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_account VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT SUBSTRING_INDEX(SESSION_USER(), '@', 1);
  DECLARE v_more INT DEFAULT 0;
  DECLARE v_last BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_next BIGINT UNSIGNED;
  DECLARE v_rows INT DEFAULT 0;
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;

  IF p_max_rows IS NULL OR p_max_rows < 1 OR p_max_rows > 1000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_changes: max_rows must be 1 to 1000';
  END IF;
  IF p_after_cursor IS NULL OR p_after_cursor < 0 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT =
      'email_changes: after_cursor must be 0 (from the start) or a cursor email_changes returned';
  END IF;
  CALL email_internal_sequence_changes(1000, v_more);
  SELECT COALESCE(MAX(last_seq), 0) INTO v_last FROM email_changes_state;
  -- A cursor no call has returned: from another database, or one restored from an older backup.
  IF p_after_cursor > v_last THEN
    SET v_message = CONCAT('email_changes: after_cursor ', p_after_cursor, ' is past the newest change (',
                           v_last, '): a cursor of another database, or of this one before a restore?');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;

  -- The page's window first, then its rows from within it: the next cursor is the window's end, so a
  -- row skipped below (its email deleted) is passed too. The window stops at v_last: every position
  -- up to it was committed before it was read, so a sequencer committing meanwhile cannot put a row
  -- into it. Read the other way round, an email retention deleted between the two reads moved the
  -- LIMIT's end past a row the page never returned: a resumed cursor missed it.
  SELECT COUNT(*), MAX(seq) INTO v_rows, v_next FROM (
    SELECT seq FROM email_changes_feed
     WHERE account = v_account AND seq > p_after_cursor AND seq <= v_last ORDER BY seq LIMIT p_max_rows
  ) r;
  SELECT f.seq AS `cursor`, f.attempt_id, a.notification_id, f.source AS `change`,
         COALESCE(e.occurred_at, p.event_at) AS occurred_at, e.from_status, e.to_status,
         p.event_type, p.recipient, p.kind, p.subkind, COALESCE(e.detail, p.detail) AS detail
    FROM (SELECT seq, attempt_id, source, source_id FROM email_changes_feed
           WHERE account = v_account AND seq > p_after_cursor AND seq <= COALESCE(v_next, p_after_cursor)
           ORDER BY seq LIMIT p_max_rows) f
    JOIN email_delivery_attempts a ON a.id = f.attempt_id
    LEFT JOIN email_delivery_events e ON f.source = 'status' AND e.id = f.source_id
    LEFT JOIN email_provider_events p ON f.source = 'provider' AND p.id = f.source_id
   WHERE e.id IS NOT NULL OR p.id IS NOT NULL
   ORDER BY f.seq;
  SELECT COALESCE(v_next, p_after_cursor) AS next_cursor, IF(v_rows >= p_max_rows OR v_more = 1, 1, 0) AS more;
END
