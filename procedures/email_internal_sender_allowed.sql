-- The allow-list rule, once: p_sender is allowed for the database user name p_account ('' asks about
-- every account) when the list holds the address or its whole domain ('@example.com'), for every
-- account ('') or for that user name. Addresses compare case-insensitively (utf8mb4_unicode_ci), and
-- only ASCII ones match: that collation also equates accented letters with plain ones.
CREATE PROCEDURE email_internal_sender_allowed(
  IN p_sender VARCHAR(320) CHARACTER SET utf8mb4,
  IN p_account VARCHAR(300) CHARACTER SET utf8mb4,
  OUT p_allowed INT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  SELECT EXISTS (
    SELECT 1 FROM email_allowed_senders
     WHERE sender IN (p_sender COLLATE utf8mb4_unicode_ci,
                      CONCAT('@', SUBSTRING_INDEX(p_sender, '@', -1)) COLLATE utf8mb4_unicode_ci)
       AND account IN ('', p_account COLLATE utf8mb4_bin)
       AND LENGTH(p_sender) = CHAR_LENGTH(p_sender) AND LENGTH(sender) = CHAR_LENGTH(sender)) INTO p_allowed;
END
