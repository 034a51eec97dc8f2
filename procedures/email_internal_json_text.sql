-- Internal: one optional string member of a JSON document (email_enqueue_message). p_value is NULL
-- when the member is absent or JSON null; any other type is refused (45002, invalid_member), naming
-- the field.
CREATE PROCEDURE email_internal_json_text(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_doc LONGTEXT CHARACTER SET utf8mb4,
  IN p_path VARCHAR(300) CHARACTER SET utf8mb4,
  IN p_field VARCHAR(300) CHARACTER SET utf8mb4,
  OUT p_value LONGTEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_type VARCHAR(32);
  DECLARE v_message VARCHAR(512) CHARACTER SET utf8mb4;
  SET p_value = NULL;
  SET v_type = JSON_TYPE(JSON_EXTRACT(p_doc, p_path));
  IF v_type = 'STRING' THEN
    SET p_value = JSON_UNQUOTE(JSON_EXTRACT(p_doc, p_path));
  ELSEIF v_type IS NOT NULL AND v_type <> 'NULL' THEN
    SET v_message = CONCAT(p_where, ': ', p_field, ' must be a string');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
  END IF;
END
