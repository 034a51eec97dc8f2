-- Internal: the arguments every email_breaker_* change takes: a provider name of 1 to 64 characters
-- and the replica's name (p_field) of 1 to 191, both under the text rules of email_internal_check_name;
-- and, when p_seconds_field is not NULL, p_seconds from 1 to 86,400.
CREATE PROCEDURE email_internal_check_breaker_args(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_provider TEXT CHARACTER SET utf8mb4,
  IN p_field VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_actor TEXT CHARACTER SET utf8mb4,
  IN p_seconds_field VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_seconds BIGINT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4;
  CALL email_internal_check_name(p_where, 'provider', p_provider, 64);
  CALL email_internal_check_name(p_where, p_field, p_actor, 191);
  IF p_seconds_field IS NOT NULL AND (p_seconds IS NULL OR p_seconds < 1 OR p_seconds > 86400) THEN
    SET v_message = CONCAT(p_where, ': ', p_seconds_field, ' must be 1 to 86400');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
END
