-- Internal: whether a whole message (a row's message_options) names an address as any to, cc, bcc,
-- reply_to or left-out suppressed recipient, compared case-insensitively as a whole (erasure's rule:
-- p_lower is the address lower-cased). Exact per mailbox, so 'ann@example.com' does not match
-- 'joann@example.com'. Read by email_erase_address for the candidates its text search found.
CREATE PROCEDURE email_internal_message_names(
  IN p_doc LONGTEXT CHARACTER SET utf8mb4,
  IN p_lower VARCHAR(320) CHARACTER SET utf8mb4,
  OUT p_found INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_lists VARCHAR(60) DEFAULT 'to,cc,bcc,reply_to,suppressed_recipients';
  DECLARE v_k INT DEFAULT 1;
  DECLARE v_list LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_i INT;
  DECLARE v_name LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_address LONGTEXT CHARACTER SET utf8mb4;
  SET p_found = 0;
  IF p_doc IS NOT NULL AND p_lower IS NOT NULL AND JSON_VALID(p_doc) THEN
    WHILE p_found = 0 AND v_k <= 5 DO
      SET v_list = JSON_EXTRACT(p_doc, CONCAT('$.', SUBSTRING_INDEX(SUBSTRING_INDEX(v_lists, ',', v_k), ',', -1)));
      IF JSON_TYPE(v_list) = 'ARRAY' THEN
        SET v_i = 0;
        WHILE p_found = 0 AND v_i < JSON_LENGTH(v_list) DO
          CALL email_internal_split_mailbox(JSON_UNQUOTE(JSON_EXTRACT(v_list, CONCAT('$[', v_i, ']'))), v_name, v_address);
          SET p_found = IF(LOWER(v_address) COLLATE utf8mb4_bin = p_lower COLLATE utf8mb4_bin, 1, 0), v_i = v_i + 1;
        END WHILE;
      END IF;
      SET v_k = v_k + 1;
    END WHILE;
  END IF;
END
