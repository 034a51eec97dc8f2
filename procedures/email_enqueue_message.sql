-- Enqueue one whole message, described by one JSON object, idempotently on notification_id, inside the
-- caller's own transaction: the same result, idempotency and transaction rules as email_enqueue, and
-- the same rules and insert (email_internal_enqueue) for what the two share. docs/procedures.md lists
-- the members: from, to, cc, bcc, reply_to, subject, text, html, headers, tags, configuration_set,
-- attachments, template, max_attempts, send_after, priority, expires_at, tenant, trace_context. Result: affected (1 new, 0 duplicate), attempt_id.
CREATE PROCEDURE email_enqueue_message(
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  IN p_message LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_where VARCHAR(64) CHARACTER SET utf8mb4 DEFAULT 'email_enqueue_message';
  DECLARE v_affected INT DEFAULT 0;
  DECLARE v_attempt_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_message VARCHAR(512) CHARACTER SET utf8mb4;
  DECLARE v_keys LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_values LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_seen LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_clean LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_headers LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_tags LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_key LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_n INT DEFAULT 0;
  DECLARE v_count INT;
  DECLARE v_recipients INT DEFAULT 0;
  DECLARE v_first LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_to_address LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_from LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_from_name LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_from_address LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_subject LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_text LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_html LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_value LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_field VARCHAR(600) CHARACTER SET utf8mb4;
  DECLARE v_template INT DEFAULT 0;
  DECLARE v_max_attempts BIGINT DEFAULT NULL;
  DECLARE v_send_after DATETIME(6) DEFAULT NULL;
  DECLARE v_expires_at DATETIME(6) DEFAULT NULL;
  DECLARE v_priority BIGINT DEFAULT NULL;
  DECLARE v_tenant LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_attachments LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_attachment_bytes BIGINT DEFAULT 0;
  DECLARE v_encoded_bytes BIGINT DEFAULT 0;
  DECLARE v_filename LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_content_type LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_disposition LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_content_id LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_content LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_decoded LONGBLOB;
  DECLARE v_options LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_trace_context LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_doc LONGTEXT CHARACTER SET utf8mb4;
  -- The attachments, one item at a time (opened once the list is known to be an array).
  DECLARE c_attachments CURSOR FOR
    SELECT t.item FROM JSON_TABLE(v_attachments, '$[*]' COLUMNS (item JSON PATH '$')) AS t;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;

  IF p_message IS NULL OR NOT JSON_VALID(p_message) OR JSON_TYPE(p_message) <> 'OBJECT' THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_enqueue_message: message must be one JSON object';
  END IF;
  -- Every member is known: a misspelt `cc` must not silently send to fewer people.
  -- A member given twice would be checked once and read twice, differently by different parsers.
  -- (MariaDB lists a repeated name once in JSON_KEYS and counts it twice in JSON_LENGTH; MySQL keeps
  -- the last and counts it once.)
  IF JSON_LENGTH(p_message) <> JSON_LENGTH(JSON_KEYS(p_message)) THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_enqueue_message: a member is given twice';
  END IF;
  SET v_keys = JSON_KEYS(p_message), v_n = JSON_LENGTH(v_keys);
  WHILE v_i < v_n DO
    SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
    -- Compared as bytes: `Cc` or `to ` is not `cc` or `to`, which is what the rest reads.
    IF CAST(v_key AS BINARY) NOT IN ('from', 'to', 'cc', 'bcc', 'reply_to', 'subject', 'text', 'html', 'headers',
                                     'tags', 'configuration_set', 'attachments', 'template', 'max_attempts',
                                     'send_after', 'priority', 'expires_at', 'tenant', 'trace_context') THEN
      SET v_message = CONCAT(v_where, ': unknown member ', LEFT(JSON_QUOTE(v_key), 80),
        ' (known: from, to, cc, bcc, reply_to, subject, text, html, headers, tags, configuration_set,',
        ' attachments, template, max_attempts, send_after, priority, expires_at, tenant, trace_context)');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
    END IF;
    SET v_i = v_i + 1;
  END WHILE;

  -- Every other member is read from the document without its attachments: each read of a member
  -- parses the document up to that member, which for a 40 MB message was a pass over 40 MB per member.
  SET v_attachments = JSON_EXTRACT(p_message, '$.attachments'), v_doc = JSON_REMOVE(p_message, '$.attachments');

  -- Recipients: at most 50 across to, cc and bcc, as SES counts them.
  CALL email_internal_check_mailboxes(v_where, v_doc, 'to', v_count, v_first);
  SET v_recipients = v_count, v_to_address = v_first;
  CALL email_internal_check_mailboxes(v_where, v_doc, 'cc', v_count, v_first);
  SET v_recipients = v_recipients + v_count, v_to_address = COALESCE(v_to_address, v_first);
  CALL email_internal_check_mailboxes(v_where, v_doc, 'bcc', v_count, v_first);
  SET v_recipients = v_recipients + v_count, v_to_address = COALESCE(v_to_address, v_first);
  IF v_recipients < 1 OR v_recipients > 50 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT =
      'email_enqueue_message: to, cc and bcc together must hold 1 to 50 addresses (SES''s limit per message)';
  END IF;
  CALL email_internal_check_mailboxes(v_where, v_doc, 'reply_to', v_count, v_first);

  CALL email_internal_json_text(v_where, v_doc, '$.from', 'from', v_from);
  CALL email_internal_check_text(v_where, 'from', v_from, 'mailbox');
  CALL email_internal_split_mailbox(v_from, v_from_name, v_from_address);
  CALL email_internal_json_text(v_where, v_doc, '$.subject', 'subject', v_subject);
  CALL email_internal_json_text(v_where, v_doc, '$.text', 'text', v_text);
  CALL email_internal_json_text(v_where, v_doc, '$.html', 'html', v_html);

  -- A stored template supplies subject and bodies itself.
  SET v_value = JSON_EXTRACT(v_doc, '$.template');
  IF v_value IS NOT NULL AND JSON_TYPE(v_value) <> 'NULL' THEN
    SET v_template = 1;
    IF JSON_TYPE(v_value) <> 'OBJECT' OR JSON_LENGTH(JSON_REMOVE(v_value, '$.name', '$.data')) > 0 THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_enqueue_message: template must be an object with name and data';
    END IF;
    CALL email_internal_json_text(v_where, v_value, '$.name', 'template.name', v_key);
    IF v_key IS NULL OR NOT v_key COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,64}$' THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT =
        'email_enqueue_message: template.name must be 1 to 64 letters, digits, underscores or dashes';
    END IF;
    IF COALESCE(JSON_TYPE(JSON_EXTRACT(v_value, '$.data')), 'OBJECT') <> 'OBJECT' THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_enqueue_message: template.data must be a JSON object';
    END IF;
    IF LENGTH(JSON_EXTRACT(v_value, '$.data')) > 262144 THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45006, MESSAGE_TEXT = 'email_enqueue_message: template.data must be at most 256 KiB';
    END IF;
    IF v_subject IS NOT NULL OR v_text IS NOT NULL OR v_html IS NOT NULL THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT =
        'email_enqueue_message: a template message takes its subject, text and html from the template: leave them out';
    END IF;
    SET v_subject = '';
  END IF;

  IF v_template = 0 AND v_subject IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_enqueue_message: subject is required (or a template)';
  END IF;

  -- Headers: names in RFC 5322's character set, none that SES or the outbox sets itself.
  SET v_value = JSON_EXTRACT(v_doc, '$.headers');
  IF v_value IS NOT NULL AND JSON_TYPE(v_value) <> 'NULL' THEN
    IF JSON_TYPE(v_value) <> 'OBJECT' OR JSON_LENGTH(v_value) > 50 THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45004, MESSAGE_TEXT = 'email_enqueue_message: headers must be an object of at most 50 names to values';
    END IF;
    IF JSON_LENGTH(v_value) <> JSON_LENGTH(JSON_KEYS(v_value)) THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45004, MESSAGE_TEXT = 'email_enqueue_message: a header name is given twice';
    END IF;
    -- Names and values by position ($.* lists the values in JSON_KEYS's order): a path built from a name
    -- would trip on `-X` or on a name written with a JSON escape. What is stored is rebuilt from the
    -- checked pairs, so nothing unchecked rides along.
    SET v_keys = JSON_KEYS(v_value), v_values = JSON_EXTRACT(v_value, '$.*'), v_n = JSON_LENGTH(v_keys), v_i = 0,
        v_seen = JSON_ARRAY(), v_headers = JSON_OBJECT();
    WHILE v_i < v_n DO
      SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
      SET v_field = CONCAT('headers.', LEFT(v_key, 80));
      IF NOT v_key COLLATE utf8mb4_bin REGEXP '^[!-9;-~]{1,76}$' THEN
        SET v_message = CONCAT(v_where, ': header name ', LEFT(JSON_QUOTE(v_key), 80),
          ' must be 1 to 76 printable ASCII characters without a colon or space (RFC 5322)');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45004, MESSAGE_TEXT = v_message;
      END IF;
      IF LOWER(v_key) IN ('from', 'to', 'cc', 'bcc', 'subject', 'date', 'message-id', 'mime-version',
                          'return-path', 'dkim-signature', 'reply-to', 'sender', 'received', 'delivered-to',
                          'content-type', 'content-transfer-encoding', 'content-disposition')
         OR LOWER(v_key) LIKE 'content-%' OR LOWER(v_key) LIKE 'x-ses-%' OR LOWER(v_key) LIKE 'resent-%' THEN
        SET v_message = CONCAT(v_where, ': header ', v_key,
          ' is set by SES or the outbox itself and cannot be given (use the message members for addresses and subject)');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45004, MESSAGE_TEXT = v_message;
      END IF;
      -- What a receiving system writes as its verdict (a forged Authentication-Results or ARC set
      -- reads as a passed check to a filter that trusts it), and requests that send mail or receipts
      -- somewhere other than the sender (read receipts, old bounce routing).
      IF LOWER(v_key) IN ('authentication-results', 'received-spf', 'domainkey-signature',
                          'disposition-notification-to', 'disposition-notification-options',
                          'return-receipt-to', 'errors-to', 'x-original-to', 'original-recipient')
         OR LOWER(v_key) LIKE 'arc-%' OR LOWER(v_key) LIKE 'dkim-%' THEN
        SET v_message = CONCAT(v_where, ': header ', v_key,
          ' is a receiving system''s verdict or asks for mail to go elsewhere, and cannot be given');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45004, MESSAGE_TEXT = v_message;
      END IF;
      IF JSON_CONTAINS(v_seen, JSON_QUOTE(LOWER(v_key))) THEN
        SET v_message = CONCAT(v_where, ': header ', v_key, ' is given twice (header names compare case-insensitively)');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45004, MESSAGE_TEXT = v_message;
      END IF;
      SET v_seen = JSON_ARRAY_APPEND(v_seen, '$', LOWER(v_key));
      CALL email_internal_json_text(v_where, v_values, CONCAT('$[', v_i, ']'), v_field, v_content);
      IF v_content IS NULL OR CHAR_LENGTH(v_content) > 998 THEN
        SET v_message = CONCAT(v_where, ': ', v_field, ' must be a string of at most 998 characters');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45004, MESSAGE_TEXT = v_message;
      END IF;
      CALL email_internal_check_text(v_where, v_field, v_content, 'text');
      SET v_headers = JSON_MERGE_PATCH(v_headers, JSON_OBJECT(v_key, v_content));
      SET v_i = v_i + 1;
    END WHILE;
  END IF;

  -- Tags, in SES's character set; outbox_id is the outbox's own.
  SET v_value = JSON_EXTRACT(v_doc, '$.tags');
  IF v_value IS NOT NULL AND JSON_TYPE(v_value) <> 'NULL' THEN
    IF JSON_TYPE(v_value) <> 'OBJECT' OR JSON_LENGTH(v_value) > 49 THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_enqueue_message: tags must be an object of at most 49 names to values';
    END IF;
    IF JSON_LENGTH(v_value) <> JSON_LENGTH(JSON_KEYS(v_value)) THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_enqueue_message: a tag name is given twice';
    END IF;
    SET v_keys = JSON_KEYS(v_value), v_values = JSON_EXTRACT(v_value, '$.*'), v_n = JSON_LENGTH(v_keys), v_i = 0,
        v_tags = JSON_OBJECT();
    WHILE v_i < v_n DO
      SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
      SET v_field = CONCAT('tags.', LEFT(v_key, 80));
      IF NOT v_key COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,256}$' THEN
        SET v_message = CONCAT(v_where, ': tag name ', LEFT(JSON_QUOTE(v_key), 80),
          ' must be 1 to 256 ASCII letters, digits, underscores or dashes (SES)');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      IF CAST(v_key AS BINARY) = 'outbox_id' THEN
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_enqueue_message: tag outbox_id is reserved: the worker sets it to the row id';
      END IF;
      CALL email_internal_json_text(v_where, v_values, CONCAT('$[', v_i, ']'), v_field, v_content);
      IF v_content IS NULL OR NOT v_content COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,256}$' THEN
        SET v_message = CONCAT(v_where, ': ', v_field, ' must be 1 to 256 ASCII letters, digits, underscores or dashes (SES)');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      SET v_tags = JSON_MERGE_PATCH(v_tags, JSON_OBJECT(v_key, v_content));
      SET v_i = v_i + 1;
    END WHILE;
  END IF;

  CALL email_internal_json_text(v_where, v_doc, '$.configuration_set', 'configuration_set', v_content);
  IF v_content IS NOT NULL AND NOT v_content COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,64}$' THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT =
      'email_enqueue_message: configuration_set must be 1 to 64 ASCII letters, digits, underscores or dashes';
  END IF;
  -- Only a set the operators put on the list: a set with no event destination would hide this
  -- message's bounces and complaints from the suppression list.
  IF v_content IS NOT NULL AND NOT EXISTS (SELECT 1 FROM email_allowed_configuration_sets
                                            WHERE name = CONVERT(v_content USING ascii)) THEN
    SET v_message = CONCAT(v_where, ': configuration_set ', v_content,
      ' is not on the list of configuration sets a message may name (email-outbox configuration-sets add)');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45011, MESSAGE_TEXT = v_message;
  END IF;

  SET v_value = JSON_EXTRACT(v_doc, '$.max_attempts');
  IF v_value IS NOT NULL AND JSON_TYPE(v_value) <> 'NULL' THEN
    IF JSON_TYPE(v_value) NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR v_value < 1 OR v_value > 100 THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_enqueue_message: max_attempts must be an integer from 1 to 100';
    END IF;
    SET v_max_attempts = CAST(v_value AS SIGNED);
  END IF;

  -- Times: ISO 8601 with an offset (or Z), stored in UTC.
  CALL email_internal_json_utc_time(v_where, v_doc, '$.send_after', 'send_after', v_send_after);
  CALL email_internal_json_utc_time(v_where, v_doc, '$.expires_at', 'expires_at', v_expires_at);

  SET v_value = JSON_EXTRACT(v_doc, '$.priority');
  IF v_value IS NOT NULL AND JSON_TYPE(v_value) <> 'NULL' THEN
    IF JSON_TYPE(v_value) NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR v_value < 0 OR v_value > 9 THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_enqueue_message: priority must be an integer from 0 to 9 (9 first)';
    END IF;
    SET v_priority = CAST(v_value AS SIGNED);
  END IF;

  -- The tenant (absent: the account's default), checked by email_internal_enqueue.
  CALL email_internal_json_text(v_where, v_doc, '$.tenant', 'tenant', v_tenant);

  -- Attachments: checked here, stored after the row exists. The list is read once, item by item
  -- (JSON_TABLE): an item picked out of the whole list by its index parses the list again each time,
  -- which cost 22 s of server CPU for 100 attachments in 5 MB (docs/performance.md, "Large messages").
  IF v_attachments IS NOT NULL AND JSON_TYPE(v_attachments) <> 'NULL' THEN
    IF JSON_TYPE(v_attachments) <> 'ARRAY' OR JSON_LENGTH(v_attachments) > 100 THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_enqueue_message: attachments must be a list of at most 100';
    END IF;
    SET v_n = JSON_LENGTH(v_attachments), v_i = 0;
    OPEN c_attachments;
    WHILE v_i < v_n DO
      SET v_field = CONCAT('attachments[', v_i, ']');
      FETCH c_attachments INTO v_value;
      IF JSON_TYPE(v_value) <> 'OBJECT' OR JSON_LENGTH(JSON_REMOVE(v_value, '$.filename', '$.content_type',
           '$.content_base64', '$.disposition', '$.content_id')) > 0 THEN
        SET v_message = CONCAT(v_where, ': ', v_field,
          ' must be an object of filename, content_type, content_base64, disposition, content_id');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
      END IF;
      CALL email_internal_json_text(v_where, v_value, '$.filename', CONCAT(v_field, '.filename'), v_filename);
      IF v_filename IS NULL OR CHAR_LENGTH(v_filename) < 1 OR CHAR_LENGTH(v_filename) > 255
         OR LOCATE('/', v_filename) > 0 OR LOCATE(CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin, v_filename) > 0
         OR v_filename IN ('.', '..') THEN
        SET v_message = CONCAT(v_where, ': ', v_field, '.filename must be 1 to 255 characters with no path (no / or backslash)');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      CALL email_internal_check_text(v_where, CONCAT(v_field, '.filename'), v_filename, 'text');
      CALL email_internal_json_text(v_where, v_value, '$.content_type', CONCAT(v_field, '.content_type'), v_content_type);
      IF v_content_type IS NULL OR CHAR_LENGTH(v_content_type) > 78 OR NOT v_content_type COLLATE utf8mb4_bin REGEXP
           '^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$' THEN
        SET v_message = CONCAT(v_where, ': ', v_field, '.content_type must be a media type such as application/pdf');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      CALL email_internal_json_text(v_where, v_value, '$.disposition', CONCAT(v_field, '.disposition'), v_disposition);
      IF COALESCE(v_disposition, 'attachment') NOT IN ('attachment', 'inline') THEN
        SET v_message = CONCAT(v_where, ': ', v_field, '.disposition must be attachment or inline');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      CALL email_internal_json_text(v_where, v_value, '$.content_id', CONCAT(v_field, '.content_id'), v_content_id);
      IF v_content_id IS NOT NULL AND NOT v_content_id COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9!#$%&*+=?^_`{|}~.@-]{1,78}$' THEN
        SET v_message = CONCAT(v_where, ': ', v_field,
          '.content_id must be 1 to 78 characters of an RFC 5322 message id, without angle brackets');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      CALL email_internal_json_text(v_where, v_value, '$.content_base64', CONCAT(v_field, '.content_base64'), v_content);
      BEGIN
        -- Bad base64 is NULL on MySQL and error 1958 on MariaDB: NULL on both.
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET v_decoded = NULL;
        SET v_decoded = FROM_BASE64(v_content);
      END;
      IF v_content IS NULL OR v_decoded IS NULL OR (LENGTH(v_decoded) = 0 AND LENGTH(TRIM(v_content)) > 0) THEN
        SET v_message = CONCAT(v_where, ': ', v_field, '.content_base64 must be base64 that decodes');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      SET v_attachment_bytes = v_attachment_bytes + LENGTH(v_decoded);
      SET v_encoded_bytes = v_encoded_bytes + LENGTH(v_content);
      SET v_i = v_i + 1;
    END WHILE;
    CLOSE c_attachments;
  END IF;
  IF COALESCE(LENGTH(v_text), 0) + COALESCE(LENGTH(v_html), 0) + v_encoded_bytes > 41943040 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45006, MESSAGE_TEXT =
      'email_enqueue_message: the message must be at most 40 MB (SES''s limit), bodies and base64 attachments together';
  END IF;

  -- What is stored is rebuilt from the members just checked, nothing else. Addresses are stored by
  -- value, in one spelling whatever JSON escapes the caller wrote (`ann` + the JSON escape of @ +
  -- `example.net` is stored as ann@example.net), so erasure finds them (email_erase_address) and so
  -- does anyone reading the row.
  SET v_clean = JSON_OBJECT('attachment_count', IF(JSON_TYPE(v_attachments) = 'ARRAY', JSON_LENGTH(v_attachments), 0));
  SET v_i = 1;
  WHILE v_i <= 7 DO
    SET v_key = SUBSTRING_INDEX(SUBSTRING_INDEX('from,to,cc,bcc,reply_to,configuration_set,template', ',', v_i), ',', -1);
    SET v_value = JSON_EXTRACT(v_doc, CONCAT('$.', v_key));
    IF v_value IS NOT NULL AND JSON_TYPE(v_value) = 'ARRAY' THEN
      SET v_content = JSON_ARRAY(), v_n = JSON_LENGTH(v_value), v_count = 0;
      WHILE v_count < v_n DO
        SET v_content = JSON_ARRAY_APPEND(v_content, '$', JSON_UNQUOTE(JSON_EXTRACT(v_value, CONCAT('$[', v_count, ']'))));
        SET v_count = v_count + 1;
      END WHILE;
      SET v_clean = JSON_SET(v_clean, CONCAT('$.', v_key), JSON_EXTRACT(v_content, '$'));
    ELSEIF v_value IS NOT NULL AND JSON_TYPE(v_value) = 'STRING' THEN
      SET v_clean = JSON_SET(v_clean, CONCAT('$.', v_key), JSON_UNQUOTE(v_value));
    ELSEIF v_value IS NOT NULL AND JSON_TYPE(v_value) <> 'NULL' THEN
      SET v_clean = JSON_SET(v_clean, CONCAT('$.', v_key), JSON_EXTRACT(v_doc, CONCAT('$.', v_key)));
    END IF;
    SET v_i = v_i + 1;
  END WHILE;
  IF v_headers IS NOT NULL THEN
    SET v_clean = JSON_SET(v_clean, '$.headers', JSON_EXTRACT(v_headers, '$'));
  END IF;
  IF v_tags IS NOT NULL THEN
    SET v_clean = JSON_SET(v_clean, '$.tags', JSON_EXTRACT(v_tags, '$'));
  END IF;
  CALL email_internal_check_trace_context(v_where, v_doc, v_trace_context);
  IF v_trace_context IS NOT NULL THEN
    SET v_clean = JSON_SET(v_clean, '$.trace_context', JSON_EXTRACT(v_trace_context, '$'));
  END IF;
  -- Recipients on the suppression list are left out (all of them suppressed: the row fails).
  CALL email_internal_drop_suppressed(v_clean, v_options, v_first);
  CALL email_internal_begin(v_own);
  CALL email_internal_enqueue(v_where, p_notification_id, COALESCE(v_first, v_to_address), v_from_address, v_subject,
                              v_text, v_html, v_max_attempts, v_send_after, v_template, v_options,
                              v_attachment_bytes, v_priority, v_expires_at, v_tenant, v_affected, v_attempt_id);
  IF v_affected = 1 AND v_attachments IS NOT NULL AND JSON_TYPE(v_attachments) = 'ARRAY' THEN
    INSERT INTO email_attachments (attempt_id, position, filename, content_type, disposition, content_id, content)
    SELECT v_attempt_id, t.position - 1, t.filename, LOWER(t.content_type), COALESCE(t.disposition, 'attachment'),
           t.content_id, FROM_BASE64(t.content)
      FROM JSON_TABLE(v_attachments, '$[*]' COLUMNS (
             position FOR ORDINALITY,
             filename LONGTEXT PATH '$.filename',
             content_type LONGTEXT PATH '$.content_type',
             disposition LONGTEXT PATH '$.disposition',
             content_id LONGTEXT PATH '$.content_id',
             content LONGTEXT PATH '$.content_base64')) AS t;
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected, v_attempt_id AS attempt_id;
END
