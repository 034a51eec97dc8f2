-- Internal: the one validation and insert path of an enqueue, shared by email_enqueue and
-- email_enqueue_message. Runs inside the caller's unit of work (email_internal_begin); writes the row
-- and its 'enqueued' event, or on a duplicate notification_id nothing, and reports the existing id
-- (NULL when the earlier row was deleted by retention and only its tombstone is left).
-- Notification ids are per enqueuing account (the database user name of SESSION_USER(), stored in
-- `account`): the same id from another account is another email, never this account's duplicate. A
-- legacy row or tombstone (account '', from before migration 0010) still answers any account.
-- p_where names the public procedure in errors. A row sent with a stored template (p_template = 1)
-- needs no body. p_message_options and p_attachment_bytes come checked from email_enqueue_message;
-- p_priority (NULL: 5) and p_expires_at (NULL: never) are checked here; p_tenant (NULL: the account's
-- default) by email_internal_enqueue_tenant, after every other rule.
CREATE PROCEDURE email_internal_enqueue(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  IN p_to_address TEXT CHARACTER SET utf8mb4,
  IN p_from_address TEXT CHARACTER SET utf8mb4,
  IN p_subject TEXT CHARACTER SET utf8mb4,
  IN p_text_body LONGTEXT CHARACTER SET utf8mb4,
  IN p_html_body LONGTEXT CHARACTER SET utf8mb4,
  IN p_max_attempts BIGINT,
  IN p_send_after DATETIME(6),
  IN p_template INT,
  IN p_message_options LONGTEXT CHARACTER SET utf8mb4,
  IN p_attachment_bytes BIGINT,
  IN p_priority BIGINT,
  IN p_expires_at DATETIME(6),
  IN p_tenant TEXT CHARACTER SET utf8mb4,
  OUT p_affected INT,
  OUT p_attempt_id BIGINT UNSIGNED
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_suppressed INT DEFAULT 0;
  DECLARE v_tombstone INT DEFAULT 0;
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;
  DECLARE v_account VARCHAR(128) CHARACTER SET utf8mb4 DEFAULT SUBSTRING_INDEX(SESSION_USER(), '@', 1);
  DECLARE v_legacy BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_tenant_id INT UNSIGNED DEFAULT 1;
  -- The duplicate key is an answer, not an error.
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;

  IF p_notification_id IS NULL OR CHAR_LENGTH(p_notification_id) < 1 OR CHAR_LENGTH(p_notification_id) > 191 THEN
    SET v_message = CONCAT(p_where, ': notification_id must be 1 to 191 characters');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  -- The unique key compares with PAD SPACE: 'a ' would collide with 'a', so refuse the ambiguity.
  IF RIGHT(p_notification_id, 1) = BINARY ' ' THEN
    SET v_message = CONCAT(p_where, ': notification_id must not end with a space');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_text(p_where, 'notification_id', p_notification_id, 'text');
  IF p_to_address IS NULL THEN
    SET v_message = CONCAT(p_where, ': to_address is required');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_text(p_where, 'to_address', p_to_address, 'address');
  CALL email_internal_check_local_part(p_where, 'to_address', p_to_address);
  CALL email_internal_check_text(p_where, 'from_address', p_from_address, 'address');
  IF p_from_address IS NOT NULL THEN
    CALL email_internal_check_sender(p_where, p_from_address);
  END IF;
  IF p_subject IS NULL OR CHAR_LENGTH(p_subject) > 998 THEN
    SET v_message = CONCAT(p_where, ': subject must be at most 998 characters');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_text(p_where, 'subject', p_subject, 'text');
  IF p_text_body IS NULL AND p_html_body IS NULL AND p_template = 0 THEN
    SET v_message = CONCAT(p_where, ': text_body or html_body must be given');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  IF LENGTH(p_text_body) > 16777215 OR LENGTH(p_html_body) > 16777215 THEN
    SET v_message = CONCAT(p_where, ': text_body and html_body must each be at most 16 MiB');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45006, MESSAGE_TEXT = v_message;
  END IF;
  IF p_max_attempts IS NOT NULL AND (p_max_attempts < 1 OR p_max_attempts > 100) THEN
    SET v_message = CONCAT(p_where, ': max_attempts must be NULL or 1 to 100');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  -- A due time far in the past is a mistake and one far ahead a typo: both are refused. One a little in
  -- the past is stored as now, so no enqueuer can put a row ahead of those already waiting.
  IF p_send_after IS NOT NULL
     AND (p_send_after < v_now - INTERVAL 30 DAY OR p_send_after > v_now + INTERVAL 366 DAY) THEN
    SET v_message = CONCAT(p_where, ': send_after must be NULL or a UTC time from 30 days ago to 366 days ahead');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  IF p_priority IS NOT NULL AND (p_priority < 0 OR p_priority > 9) THEN
    SET v_message = CONCAT(p_where, ': priority must be NULL or 0 to 9 (9 first)');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  -- An expiry at or before the first moment the row may go out could never be met.
  IF p_expires_at IS NOT NULL AND p_expires_at <= COALESCE(p_send_after, v_now) THEN
    SET v_message = CONCAT(p_where, ': expires_at must be later than send_after (now when not given)');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;

  CALL email_internal_enqueue_tenant(p_where, v_account, p_tenant, p_priority, v_tenant_id);

  -- A row from before ids were per account, whose account is unknown, keeps answering as before.
  -- A plain read: a locking one would take a gap lock on every new id and deadlock concurrent inserts.
  SELECT MAX(id) INTO v_legacy FROM email_delivery_attempts
   WHERE notification_id = p_notification_id COLLATE utf8mb4_bin AND account = '';
  IF v_legacy IS NOT NULL THEN
    SET p_affected = 0, p_attempt_id = v_legacy;
  ELSE
    INSERT INTO email_delivery_attempts
      (account, notification_id, to_address, from_address, subject, text_body, html_body, status,
       max_attempts, next_attempt_at, created_at, updated_at, message_options, attachment_bytes, priority,
       expires_at, tenant_id)
    VALUES
      (v_account, p_notification_id, p_to_address, p_from_address, p_subject, p_text_body, p_html_body, 'Pending',
       COALESCE(p_max_attempts, 5), GREATEST(COALESCE(p_send_after, v_now), v_now), v_now, v_now, p_message_options,
       COALESCE(p_attachment_bytes, 0), COALESCE(p_priority, 5), p_expires_at, v_tenant_id);

    IF v_duplicate = 0 THEN
      SET p_attempt_id = LAST_INSERT_ID();
      -- Retention deleted an earlier row with this id of this account (or a legacy one) less than its
      -- keep_ids_days ago (email_retention): still a duplicate, with no row to name. Checked after the
      -- insert, with a locking read: an insert that waited on the old row's delete succeeds only once
      -- that delete (and the tombstone written in the same transaction) has committed, which a check
      -- before the insert could miss.
      CALL email_internal_id_tombstoned(v_account, p_notification_id, DATE(v_now), v_tombstone);
      IF v_tombstone > 0 THEN
        DELETE FROM email_delivery_attempts WHERE id = p_attempt_id;
        SET v_duplicate = 1, p_attempt_id = NULL;
      END IF;
    END IF;
    IF v_duplicate = 0 THEN
      SET p_affected = 1;
      CALL email_internal_record_event(p_attempt_id, v_now, NULL, 'Pending', NULL, SESSION_USER(), 'enqueued');
      -- To a suppressed address, the new row ends Failed at once and is never sent.
      CALL email_internal_fail_if_suppressed(p_attempt_id, v_now, SESSION_USER(), v_suppressed);
    ELSEIF v_tombstone > 0 THEN
      SET p_affected = 0;
    ELSE
      SET p_affected = 0;
      -- A locking read sees the committed row even when the caller's snapshot predates it.
      SELECT id INTO p_attempt_id FROM email_delivery_attempts
       WHERE notification_id = p_notification_id COLLATE utf8mb4_bin AND account = v_account
       LOCK IN SHARE MODE;
    END IF;
  END IF;
END
