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
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  -- '@example.com' is checked as the address 'x@example.com' would be.
  CALL email_internal_check_text(p_where, 'sender',
    IF(LEFT(p_sender, 1) = '@', CONCAT('x', p_sender), p_sender), 'address');
  CALL email_internal_check_text(p_where, 'account', p_account, 'text');
  IF CHAR_LENGTH(p_account) > 80 OR LOCATE('@', p_account) > 0 THEN
    SET v_message = CONCAT(p_where, ': account must be a database user name (no @host), at most 80 characters');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  IF p_by IS NULL OR CHAR_LENGTH(TRIM(p_by)) < 1 OR CHAR_LENGTH(p_by) > 191 THEN
    SET v_message = CONCAT(p_where, ': by must be 1 to 191 characters, not blank');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  IF p_reason IS NULL OR CHAR_LENGTH(TRIM(p_reason)) < 1 OR CHAR_LENGTH(p_reason) > 2000 THEN
    SET v_message = CONCAT(p_where, ': reason must be 1 to 2000 characters, not blank');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_text(p_where, 'by', p_by, 'text');
  CALL email_internal_check_text(p_where, 'reason', p_reason, 'text');
END
