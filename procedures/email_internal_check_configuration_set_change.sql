-- Internal: the arguments of email_configuration_set_add and _remove, checked once for both: a name
-- as SES spells one (1 to 64 ASCII letters, digits, underscores or dashes), and who and why.
CREATE PROCEDURE email_internal_check_configuration_set_change(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;
  IF p_name IS NULL OR NOT p_name COLLATE utf8mb4_bin REGEXP '^[A-Za-z0-9_-]{1,64}$' THEN
    SET v_message = CONCAT(p_where, ': name must be 1 to 64 ASCII letters, digits, underscores or dashes');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_name(p_where, 'by', p_by, 191);
  CALL email_internal_check_name(p_where, 'reason', p_reason, 2000);
END
