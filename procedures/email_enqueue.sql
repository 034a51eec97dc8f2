-- Enqueue one email, idempotently on notification_id, inside the caller's own transaction.
-- Never starts, commits or rolls back: a duplicate leaves the caller's transaction and its earlier
-- writes intact. Result: affected (1 new, 0 duplicate), attempt_id (the existing row's on a duplicate).
CREATE PROCEDURE email_enqueue(
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  IN p_to_address TEXT CHARACTER SET utf8mb4,
  IN p_from_address TEXT CHARACTER SET utf8mb4,
  IN p_subject TEXT CHARACTER SET utf8mb4,
  IN p_text_body LONGTEXT CHARACTER SET utf8mb4,
  IN p_html_body LONGTEXT CHARACTER SET utf8mb4,
  IN p_max_attempts BIGINT,
  IN p_send_after DATETIME(6)
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_attempt_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_suppressed INT DEFAULT 0;
  -- The duplicate key is an answer, not an error. Every other error (deadlock included) undoes this
  -- call's writes, leaves the caller's earlier writes alone, and reaches the caller.
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;

  IF p_notification_id IS NULL OR CHAR_LENGTH(p_notification_id) < 1 OR CHAR_LENGTH(p_notification_id) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_enqueue: notification_id must be 1 to 191 characters';
  END IF;
  -- The unique key compares with PAD SPACE: 'a ' would collide with 'a', so refuse the ambiguity.
  IF RIGHT(p_notification_id, 1) = BINARY ' ' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_enqueue: notification_id must not end with a space';
  END IF;
  CALL email_internal_check_text('email_enqueue', 'notification_id', p_notification_id, 'text');
  IF p_to_address IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_enqueue: to_address is required';
  END IF;
  CALL email_internal_check_text('email_enqueue', 'to_address', p_to_address, 'address');
  CALL email_internal_check_text('email_enqueue', 'from_address', p_from_address, 'address');
  IF p_from_address IS NOT NULL THEN
    CALL email_internal_check_sender('email_enqueue', p_from_address);
  END IF;
  IF p_subject IS NULL OR CHAR_LENGTH(p_subject) > 998 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_enqueue: subject must be at most 998 characters';
  END IF;
  CALL email_internal_check_text('email_enqueue', 'subject', p_subject, 'text');
  IF p_text_body IS NULL AND p_html_body IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_enqueue: text_body or html_body must be given';
  END IF;
  IF LENGTH(p_text_body) > 16777215 OR LENGTH(p_html_body) > 16777215 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_enqueue: text_body and html_body must each be at most 16 MiB';
  END IF;
  IF p_max_attempts IS NOT NULL AND (p_max_attempts < 1 OR p_max_attempts > 100) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_enqueue: max_attempts must be NULL or 1 to 100';
  END IF;
  -- A due time far in the past would jump every queue; one far ahead is a typo. Both are refused.
  IF p_send_after IS NOT NULL
     AND (p_send_after < v_now - INTERVAL 30 DAY OR p_send_after > v_now + INTERVAL 366 DAY) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
      'email_enqueue: send_after must be NULL or a UTC time from 30 days ago to 366 days ahead';
  END IF;

  CALL email_internal_begin(v_own);
  INSERT INTO email_delivery_attempts
    (notification_id, to_address, from_address, subject, text_body, html_body, status,
     max_attempts, next_attempt_at, created_at, updated_at)
  VALUES
    (p_notification_id, p_to_address, p_from_address, p_subject, p_text_body, p_html_body, 'Pending',
     COALESCE(p_max_attempts, 5), COALESCE(p_send_after, v_now), v_now, v_now);

  IF v_duplicate = 0 THEN
    SET v_attempt_id = LAST_INSERT_ID();
    CALL email_internal_record_event(v_attempt_id, v_now, NULL, 'Pending', NULL, SESSION_USER(), 'enqueued');
    -- Issue 15: to a suppressed address, the new row ends Failed at once and is never sent.
    CALL email_internal_fail_if_suppressed(v_attempt_id, v_now, SESSION_USER(), v_suppressed);
  ELSE
    -- A locking read sees the committed row even when the caller's snapshot predates it.
    SELECT id INTO v_attempt_id FROM email_delivery_attempts
     WHERE notification_id = p_notification_id COLLATE utf8mb4_bin
     LOCK IN SHARE MODE;
  END IF;
  CALL email_internal_end(v_own);
  SELECT 1 - v_duplicate AS affected, v_attempt_id AS attempt_id;
END
