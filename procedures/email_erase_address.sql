-- Erasure: remove one address (compared case-insensitively, the whole address) from every outbox table
-- where no guarantee needs it. Each row it is a recipient of (to, cc, bcc, or reply_to of a whole
-- message) loses its bodies, subject, addresses, message options, last error text and attachments,
-- and keeps its id, status, dates and counts as an anonymous accounting record; a row still due
-- (Pending, Retrying) can no longer be sent and ends Failed ('Erased'); a notification id that holds
-- the address is replaced (its tombstone keeps the old id a duplicate for 400 days). Audit events of
-- those rows that name it are blanked, and each row gets an 'erased' event. Provider events lose it
-- (recipient, detail, match note). Its suppression entry keeps only the keyed hash
-- (email_internal_erased_key), so it stays suppressed; the suppression log loses it.
-- A row in Processing is left alone (a worker may be sending it): counted in `processing`; call again
-- once its claim has ended, and the rerun finishes the job. The erasure is recorded in email_erasures
-- by the address's keyed hash, never in clear; reason and actor must not contain the address.
-- The search reads every row that has message_options once (cc and bcc are not indexed), with a
-- consistent read that locks nothing; the changes are one short transaction by primary key.
-- Refusals: 45003 (the address), 45001 (actor, reason; either containing the address), 45010 (text).
-- Result: erased (rows), processing (rows left for a rerun), provider_events, suppression_entries.
CREATE PROCEDURE email_erase_address(
  IN p_address TEXT CHARACTER SET utf8mb4,
  IN p_actor TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_lower VARCHAR(320) CHARACTER SET utf8mb4;
  DECLARE v_erased_key VARCHAR(72) CHARACTER SET utf8mb4;
  DECLARE v_listed_key VARCHAR(72) CHARACTER SET utf8mb4;
  DECLARE v_key_id SMALLINT UNSIGNED;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_text LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_found INT;
  DECLARE v_status VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_to_status VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_notification_id VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_id_account VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
  DECLARE v_first_entry BIGINT UNSIGNED;
  DECLARE v_id_hash BINARY(32);
  DECLARE v_end INT DEFAULT 0;
  DECLARE v_erased INT DEFAULT 0;
  DECLARE v_processing INT DEFAULT 0;
  DECLARE v_provider INT DEFAULT 0;
  DECLARE v_suppression INT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  -- The search: consistent reads (no locks); each candidate is checked exactly below.
  DECLARE c_by_to CURSOR FOR
    SELECT id, to_address FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_to_id)
     WHERE to_address = p_address COLLATE utf8mb4_unicode_ci;
  -- A row stored before addresses were stored by value may spell one with JSON escapes
  -- (the @ as its
  -- JSON escape): every row with a backslash is a candidate too, and
  -- email_internal_message_names compares each candidate's addresses by value.
  DECLARE c_by_options CURSOR FOR
    SELECT id, message_options FROM email_delivery_attempts
     WHERE message_options IS NOT NULL
       AND (LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(message_options) COLLATE utf8mb4_bin) > 0
            OR LOCATE(CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin, message_options COLLATE utf8mb4_bin) > 0);
  DECLARE c_provider CURSOR FOR
    SELECT id FROM email_provider_events
     WHERE LOCATE(v_lower COLLATE utf8mb4_bin,
                  LOWER(CONCAT_WS(' ', recipient, detail, match_note)) COLLATE utf8mb4_bin) > 0;
  DECLARE c_suppressed CURSOR FOR
    SELECT id FROM email_suppressed_addresses
     WHERE LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(CONCAT_WS(' ', address, detail)) COLLATE utf8mb4_bin) > 0;
  DECLARE c_log CURSOR FOR
    SELECT id FROM email_suppressed_addresses_log
     WHERE LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(CONCAT_WS(' ', address, detail)) COLLATE utf8mb4_bin) > 0;
  DECLARE c_rows CURSOR FOR SELECT id FROM email_erase_ids WHERE kind = 'row' ORDER BY id;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_end = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;

  IF p_address IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = 'email_erase_address: address is required';
  END IF;
  CALL email_internal_check_text('email_erase_address', 'address', p_address, 'address');
  CALL email_internal_check_name('email_erase_address', 'actor', p_actor, 191);
  CALL email_internal_check_name('email_erase_address', 'reason', p_reason, 2000);
  SET v_lower = LOWER(p_address);
  IF LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(CONCAT(p_actor, ' ', p_reason)) COLLATE utf8mb4_bin) > 0 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT =
      'email_erase_address: actor and reason must not contain the address (they are kept in the audit trail)';
  END IF;
  CALL email_internal_erased_key(p_address, v_erased_key, v_listed_key);

  CREATE TEMPORARY TABLE IF NOT EXISTS email_erase_ids (
    kind ENUM('row', 'provider', 'suppressed', 'log') NOT NULL,
    id BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (kind, id)
  ) ENGINE = MEMORY;
  DELETE FROM email_erase_ids;

  -- The rows it is a recipient of: the first to by its index, every other to, cc, bcc and reply_to
  -- through message_options.
  SET v_end = 0;
  OPEN c_by_to;
  by_to: LOOP
    FETCH c_by_to INTO v_id, v_text;
    IF v_end = 1 THEN
      LEAVE by_to;
    END IF;
    IF LOWER(v_text) COLLATE utf8mb4_bin = v_lower COLLATE utf8mb4_bin THEN
      INSERT IGNORE INTO email_erase_ids (kind, id) VALUES ('row', v_id);
    END IF;
  END LOOP;
  CLOSE c_by_to;
  SET v_end = 0;
  OPEN c_by_options;
  by_options: LOOP
    FETCH c_by_options INTO v_id, v_text;
    IF v_end = 1 THEN
      LEAVE by_options;
    END IF;
    CALL email_internal_message_names(v_text, v_lower, v_found);
    IF v_found = 1 THEN
      INSERT IGNORE INTO email_erase_ids (kind, id) VALUES ('row', v_id);
    END IF;
  END LOOP;
  CLOSE c_by_options;
  SET v_end = 0;
  OPEN c_provider;
  provider: LOOP
    FETCH c_provider INTO v_id;
    IF v_end = 1 THEN
      LEAVE provider;
    END IF;
    INSERT IGNORE INTO email_erase_ids (kind, id) VALUES ('provider', v_id);
  END LOOP;
  CLOSE c_provider;
  SET v_end = 0;
  OPEN c_suppressed;
  suppressed: LOOP
    FETCH c_suppressed INTO v_id;
    IF v_end = 1 THEN
      LEAVE suppressed;
    END IF;
    INSERT IGNORE INTO email_erase_ids (kind, id) VALUES ('suppressed', v_id);
  END LOOP;
  CLOSE c_suppressed;
  SET v_end = 0;
  OPEN c_log;
  log_lines: LOOP
    FETCH c_log INTO v_id;
    IF v_end = 1 THEN
      LEAVE log_lines;
    END IF;
    INSERT IGNORE INTO email_erase_ids (kind, id) VALUES ('log', v_id);
  END LOOP;
  CLOSE c_log;

  CALL email_internal_begin(v_own);
  SET v_end = 0;
  OPEN c_rows;
  each_row: LOOP
    FETCH c_rows INTO v_id;
    IF v_end = 1 THEN
      LEAVE each_row;
    END IF;
    SET v_status = NULL;
    SELECT status, notification_id, account INTO v_status, v_notification_id, v_id_account
      FROM email_delivery_attempts FORCE INDEX (PRIMARY) WHERE id = v_id FOR UPDATE;
    IF v_end = 1 THEN
      -- deleted meanwhile (retention): nothing left of it to erase
      SET v_end = 0;
    ELSEIF v_status = 'Processing' THEN
      SET v_processing = v_processing + 1;
    ELSE
      SET v_to_status = IF(v_status IN ('Pending', 'Retrying'), 'Failed', v_status);
      -- (SET is applied left to right: status last, after the columns that read the old one.)
      UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
         SET to_address = '', subject = '', text_body = NULL, html_body = NULL, message_options = NULL,
             last_error_message = NULL,
             last_error_code = IF(status IN ('Pending', 'Retrying'), 'Erased', last_error_code),
             claimed_from_status = NULL,
             updated_at = IF(status IN ('Pending', 'Retrying'), v_now, updated_at),
             bodies_purged_at = COALESCE(bodies_purged_at, v_now),
             notification_id = IF(LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(notification_id) COLLATE utf8mb4_bin) > 0,
                                  CONCAT('erased-', id), notification_id),
             row_version = row_version + 1,
             status = v_to_status
       WHERE id = v_id AND status <> 'Processing';
      IF LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(v_notification_id) COLLATE utf8mb4_bin) > 0 THEN
        -- The id named the address: a retry of it is still a duplicate, as after retention; kept by
        -- its keyed hash, which a guess of the id does not confirm.
        CALL email_internal_id_hash(v_notification_id, v_key_id, v_id_hash);
        INSERT INTO email_notification_tombstones (account, id_hash, key_id, deleted_on, keep_until)
        VALUES (COALESCE(v_id_account, ''), v_id_hash, v_key_id, DATE(v_now), DATE(v_now + INTERVAL 400 DAY))
        ON DUPLICATE KEY UPDATE keep_until = GREATEST(keep_until, VALUES(keep_until));
      END IF;
      DELETE FROM email_attachments WHERE attempt_id = v_id;
      UPDATE email_delivery_events SET detail = 'erased'
       WHERE attempt_id = v_id AND LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(detail) COLLATE utf8mb4_bin) > 0;
      CALL email_internal_record_event(v_id, v_now, v_status, v_to_status, NULL, p_actor,
                                       CONCAT('erased: ', p_reason));
      SET v_erased = v_erased + 1;
    END IF;
  END LOOP;
  CLOSE c_rows;

  UPDATE email_erase_ids x STRAIGHT_JOIN email_provider_events p ON p.id = x.id
     SET p.recipient = IF(LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(p.recipient) COLLATE utf8mb4_bin) > 0, NULL, p.recipient),
         p.detail = IF(LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(p.detail) COLLATE utf8mb4_bin) > 0, NULL, p.detail),
         p.match_note = IF(LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(p.match_note) COLLATE utf8mb4_bin) > 0, NULL, p.match_note)
   WHERE x.kind = 'provider';
  SET v_provider = ROW_COUNT();

  -- The suppression entry: kept under the keyed hash (once, whatever spellings were listed), so the
  -- address stays suppressed; every other entry that names it loses the text.
  SELECT MIN(s.id) INTO v_first_entry FROM email_erase_ids x STRAIGHT_JOIN email_suppressed_addresses s ON s.id = x.id
   WHERE x.kind = 'suppressed' AND LOWER(s.address) COLLATE utf8mb4_bin = v_lower COLLATE utf8mb4_bin;
  IF v_first_entry IS NOT NULL THEN
    -- Already there under a key held (an earlier erasure): that entry stays as it is.
    IF v_listed_key IS NULL THEN
      UPDATE email_suppressed_addresses
         SET address_key = v_erased_key, address = '(erased)', detail = CONCAT('erased: ', p_reason)
       WHERE id = v_first_entry;
    END IF;
    DELETE s FROM email_erase_ids x STRAIGHT_JOIN email_suppressed_addresses s ON s.id = x.id
     WHERE x.kind = 'suppressed' AND LOWER(s.address) COLLATE utf8mb4_bin = v_lower COLLATE utf8mb4_bin;
    SET v_suppression = 1;
  END IF;
  UPDATE email_erase_ids x STRAIGHT_JOIN email_suppressed_addresses s ON s.id = x.id
     SET s.detail = CONCAT('erased: ', p_reason)
   WHERE x.kind = 'suppressed' AND LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(s.detail) COLLATE utf8mb4_bin) > 0;
  UPDATE email_erase_ids x STRAIGHT_JOIN email_suppressed_addresses_log l ON l.id = x.id
     SET l.address = IF(LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(l.address) COLLATE utf8mb4_bin) > 0, '(erased)', l.address),
         l.detail = IF(LOCATE(v_lower COLLATE utf8mb4_bin, LOWER(l.detail) COLLATE utf8mb4_bin) > 0, CONCAT('erased: ', p_reason), l.detail)
   WHERE x.kind = 'log';

  INSERT INTO email_erasures
    (occurred_at, actor, db_account, reason, address_hash, rows_erased, rows_processing, provider_events, suppression_entries)
  VALUES (v_now, p_actor, SESSION_USER(), p_reason, v_erased_key, v_erased, v_processing, v_provider, v_suppression);
  CALL email_internal_end(v_own);
  DELETE FROM email_erase_ids;
  SELECT v_erased AS erased, v_processing AS processing, v_provider AS provider_events,
         v_suppression AS suppression_entries;
END
