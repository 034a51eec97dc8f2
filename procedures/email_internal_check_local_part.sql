-- Internal: a recipient's local part (before the last @) must be ASCII: SES takes a 7-bit local part
-- (no SMTPUTF8), so `jösé@example.com` could only be sent mangled or refused at send. The domain may be
-- non-ASCII: the worker sends it as Punycode (`xn--`). Refuses with 45003 naming p_where and p_field.
-- NULL passes: callers decide what is required.
CREATE PROCEDURE email_internal_check_local_part(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_field VARCHAR(300) CHARACTER SET utf8mb4,
  IN p_address LONGTEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_local LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_message VARCHAR(512) CHARACTER SET utf8mb4;
  IF p_address IS NOT NULL THEN
    SET v_local = LEFT(p_address, CHAR_LENGTH(p_address) - CHAR_LENGTH(SUBSTRING_INDEX(p_address, '@', -1)) - 1);
    -- utf8mb4 spends more than one byte on every character outside ASCII.
    IF LENGTH(v_local) <> CHAR_LENGTH(v_local) THEN
      SET v_message = CONCAT(p_where, ': ', p_field,
        ' local part (before the @) must be ASCII: SES cannot send to a non-ASCII local part',
        ' (a non-ASCII domain is fine: it is sent as Punycode)');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
    END IF;
  END IF;
END
