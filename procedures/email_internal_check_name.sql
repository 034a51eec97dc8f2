-- Internal: who did something and why, as every operator action and audited change takes them: 1 to
-- p_max characters, not blank, and the text rules of email_internal_check_text. Refuses with 45001
-- (invalid_argument; 45010 from the text rules) naming p_where and p_field.
CREATE PROCEDURE email_internal_check_name(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_field VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_value LONGTEXT CHARACTER SET utf8mb4,
  IN p_max INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(512) CHARACTER SET utf8mb4;
  IF p_value IS NULL OR CHAR_LENGTH(TRIM(p_value)) < 1 OR CHAR_LENGTH(p_value) > p_max THEN
    SET v_message = CONCAT(p_where, ': ', p_field, ' must be 1 to ', p_max, ' characters, not blank');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_text(p_where, p_field, p_value, 'text');
END
