-- Internal: `Name <address>` into its display name and address; a value without angle brackets is a
-- bare address with no name (p_name NULL). Checks nothing: email_internal_check_text does.
CREATE PROCEDURE email_internal_split_mailbox(
  IN p_mailbox LONGTEXT CHARACTER SET utf8mb4,
  OUT p_name LONGTEXT CHARACTER SET utf8mb4,
  OUT p_address LONGTEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  SET p_name = NULL, p_address = p_mailbox;
  IF RIGHT(p_mailbox, 1) = '>' AND LOCATE('<', p_mailbox) > 0 THEN
    SET p_address = SUBSTRING_INDEX(LEFT(p_mailbox, CHAR_LENGTH(p_mailbox) - 1), '<', -1);
    SET p_name = TRIM(LEFT(p_mailbox, CHAR_LENGTH(p_mailbox) - CHAR_LENGTH(p_address) - 2));
  END IF;
END
