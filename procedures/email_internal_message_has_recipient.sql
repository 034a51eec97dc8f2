-- Internal: whether a whole message (email_enqueue_message's document, a row's message_options) was
-- sent to a recipient as any to, cc or bcc, compared by email_internal_address_key. A recipient left
-- out as suppressed (`suppressed_recipients`) was never sent to and does not count. Read only when an
-- SES event's outbox_id tag names a row whose to_address is not the event's recipient.
CREATE PROCEDURE email_internal_message_has_recipient(
  IN p_doc LONGTEXT CHARACTER SET utf8mb4,
  IN p_recipient_key VARCHAR(320) CHARACTER SET utf8mb4,
  OUT p_found INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_lists VARCHAR(20) DEFAULT 'to,cc,bcc';
  DECLARE v_k INT DEFAULT 1;
  DECLARE v_list LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_i INT;
  DECLARE v_name LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_address LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_key VARCHAR(320) CHARACTER SET utf8mb4;
  SET p_found = 0;
  IF p_doc IS NOT NULL AND p_recipient_key IS NOT NULL AND JSON_VALID(p_doc) THEN
    WHILE p_found = 0 AND v_k <= 3 DO
      SET v_list = JSON_EXTRACT(p_doc, CONCAT('$.', SUBSTRING_INDEX(SUBSTRING_INDEX(v_lists, ',', v_k), ',', -1)));
      IF JSON_TYPE(v_list) = 'ARRAY' THEN
        SET v_i = 0;
        WHILE p_found = 0 AND v_i < JSON_LENGTH(v_list) DO
          CALL email_internal_split_mailbox(JSON_UNQUOTE(JSON_EXTRACT(v_list, CONCAT('$[', v_i, ']'))), v_name, v_address);
          CALL email_internal_address_key(v_address, v_key);
          SET p_found = IF(v_key = p_recipient_key COLLATE utf8mb4_bin, 1, 0), v_i = v_i + 1;
        END WHILE;
      END IF;
      SET v_k = v_k + 1;
    END WHILE;
  END IF;
END
