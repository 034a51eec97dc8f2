-- Internal: one recipient list of a message document (`to`, `cc`, `bcc` or `reply_to`): absent or
-- an array of strings, each an address alone or as `Name <address>` (email_internal_check_text
-- 'mailbox') with an ASCII local part (email_internal_check_local_part). Returns how many, and the
-- bare address of the first. Refuses with 45003 (invalid_address): not a list, more than 50, an entry
-- that is no address.
CREATE PROCEDURE email_internal_check_mailboxes(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_doc LONGTEXT CHARACTER SET utf8mb4,
  IN p_key VARCHAR(32) CHARACTER SET utf8mb4,
  OUT p_count INT,
  OUT p_first_address LONGTEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_list LONGTEXT CHARACTER SET utf8mb4 DEFAULT JSON_EXTRACT(p_doc, CONCAT('$.', p_key));
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_item LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_name LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_address LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_field VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_message VARCHAR(512) CHARACTER SET utf8mb4;
  SET p_count = 0, p_first_address = NULL;
  IF v_list IS NOT NULL AND JSON_TYPE(v_list) <> 'NULL' THEN
    IF JSON_TYPE(v_list) <> 'ARRAY' THEN
      SET v_message = CONCAT(p_where, ': ', p_key, ' must be a list of addresses');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
    END IF;
    SET p_count = JSON_LENGTH(v_list);
    IF p_count > 50 THEN
      SET v_message = CONCAT(p_where, ': ', p_key, ' must hold at most 50 addresses (SES counts 50 recipients per message)');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
    END IF;
    WHILE v_i < p_count DO
      SET v_field = CONCAT(p_key, '[', v_i, ']');
      CALL email_internal_json_text(p_where, v_list, CONCAT('$[', v_i, ']'), v_field, v_item);
      IF v_item IS NULL THEN
        SET v_message = CONCAT(p_where, ': ', v_field, ' must be an address');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
      END IF;
      CALL email_internal_check_text(p_where, v_field, v_item, 'mailbox');
      CALL email_internal_split_mailbox(v_item, v_name, v_address);
      CALL email_internal_check_local_part(p_where, v_field, v_address);
      IF v_i = 0 THEN
        SET p_first_address = v_address;
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
  END IF;
END
