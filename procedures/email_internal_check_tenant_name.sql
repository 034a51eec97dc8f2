-- Internal: a tenant's name, and an SES tenant name, by SES's rule: 1 to 64 of A-Za-z0-9_-. Refuses
-- with 45001 (invalid_argument) naming p_where and p_field.
CREATE PROCEDURE email_internal_check_tenant_name(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_field VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_value TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;
  -- Character by character against an ASCII list: no collation or regular-expression flavour decides.
  DECLARE v_i INT DEFAULT 0;
  IF p_value IS NULL OR CHAR_LENGTH(p_value) < 1 OR CHAR_LENGTH(p_value) > 64 THEN
    SET v_i = -1;
  ELSE
    WHILE v_i >= 0 AND v_i < CHAR_LENGTH(p_value) DO
      SET v_i = v_i + 1;
      IF LOCATE(BINARY SUBSTRING(p_value, v_i, 1),
                BINARY 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-') = 0 THEN
        SET v_i = -1;
      END IF;
    END WHILE;
  END IF;
  IF v_i < 0 THEN
    SET v_message = CONCAT(p_where, ': ', p_field, ' must be 1 to 64 of A-Za-z0-9_-');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
END
