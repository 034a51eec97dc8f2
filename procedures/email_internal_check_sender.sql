-- Refuses with 45005 (sender_not_allowed) unless the calling account may send as p_sender. The account is SESSION_USER(), the
-- server's word for who called, never a name the caller passes in. A sender is ASCII (an international
-- domain in its xn-- form, as SES wants it), else 45003: the allow-list's comparison folds case, and
-- folding accents too would let billing@exämple.com pass as billing@example.com.
CREATE PROCEDURE email_internal_check_sender(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_sender VARCHAR(320) CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_allowed INT DEFAULT 0;
  DECLARE v_message VARCHAR(600) CHARACTER SET utf8mb4;
  IF LENGTH(p_sender) <> CHAR_LENGTH(p_sender) THEN
    SET v_message = CONCAT(p_where, ': from_address must be ASCII (write an international domain as xn--...)');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_sender_allowed(p_sender, SUBSTRING_INDEX(SESSION_USER(), '@', 1), v_allowed);
  IF v_allowed = 0 THEN
    SET v_message = CONCAT(p_where, ': from_address ', p_sender,
      ' is not an allowed sender for this account (email-outbox senders add)');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45005, MESSAGE_TEXT = v_message;
  END IF;
END
