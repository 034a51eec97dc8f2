-- The arguments of email_sender_add and email_sender_remove, checked once for both.
CREATE PROCEDURE email_internal_check_sender_change(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_sender TEXT CHARACTER SET utf8mb4,
  IN p_account TEXT CHARACTER SET utf8mb4,
  IN p_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;
  IF p_sender IS NULL THEN
    SET v_message = CONCAT(p_where, ': sender is required (an address, or @domain for a whole domain)');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
  END IF;
  -- '@example.com' is checked as the address 'x@example.com' would be.
  CALL email_internal_check_text(p_where, 'sender',
    IF(LEFT(p_sender, 1) = '@', CONCAT('x', p_sender), p_sender), 'address');
  IF LENGTH(p_sender) <> CHAR_LENGTH(p_sender) THEN
    SET v_message = CONCAT(p_where, ': sender must be ASCII (write an international domain as xn--...)');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_text(p_where, 'account', p_account, 'text');
  IF CHAR_LENGTH(p_account) > 80 OR LOCATE('@', p_account) > 0 THEN
    SET v_message = CONCAT(p_where, ': account must be a database user name (no @host), at most 80 characters');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_name(p_where, 'by', p_by, 191);
  CALL email_internal_check_name(p_where, 'reason', p_reason, 2000);
END
