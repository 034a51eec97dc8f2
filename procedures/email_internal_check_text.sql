-- The one rule set for every text that becomes a mail header or a log field (docs/security.md).
-- p_kind 'text': no C0 or C1 control (TAB, CR and LF included), no DEL, no U+2028/U+2029, no bidi
-- formatting character (U+061C, U+200E/F, U+202A-E, U+2066-9), no invisible format character (soft
-- hyphen U+00AD, U+180E, zero width space U+200B, U+2060-4, U+206A-F, U+FEFF, U+FFF9-B). In an
-- address also no zero width (non-)joiner U+200C/D, which text keeps for emoji and scripts that need
-- them: `billing` + U+200B + `@example.com` reads as billing@example.com. p_kind 'address': the same, and one
-- bare address: at most 320 characters, exactly one @ with text on both sides, no space, comma,
-- semicolon, quote, parenthesis, backslash or angle bracket. p_kind 'mailbox': a bare address as
-- above, or a display name and one: `Ann Lee <ann@example.com>`, the name at most 256 characters with
-- no angle bracket, quote, backslash or @ (a name that reads as an address), or wholly in double quotes (`"Lee, Ann" <ann@example.com>`)
-- to carry a comma or semicolon. NULL passes: callers decide what is required.
-- Refuses naming p_where and p_field, with 45010 (unsafe_text) for a character the text rules forbid
-- and 45003 (invalid_address) for an address or mailbox that breaks its rules; writes nothing.
-- A procedure, not a function: creating functions with the binary log on needs SUPER.
CREATE PROCEDURE email_internal_check_text(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_field VARCHAR(300) CHARACTER SET utf8mb4,
  IN p_value LONGTEXT CHARACTER SET utf8mb4,
  IN p_kind VARCHAR(16) CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_message VARCHAR(512) CHARACTER SET utf8mb4;
  DECLARE v_address LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_name LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_unsafe VARCHAR(200) CHARACTER SET utf8mb4 DEFAULT REPLACE(
                                                                '[~x{0}-~x{1F}~x{7F}-~x{9F}~x{2028}~x{2029}~x{202A}-~x{202E}~x{2066}-~x{2069}~x{200E}~x{200F}~x{61C}~x{AD}~x{180E}~x{200B}~x{2060}-~x{2064}~x{206A}-~x{206F}~x{FEFF}~x{FFF9}-~x{FFFB}]',
                                                                '~', CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin);
  DECLARE v_joiner VARCHAR(40) CHARACTER SET utf8mb4 DEFAULT REPLACE(
    '[~x{200C}~x{200D}]', '~', CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin);
  IF p_value IS NOT NULL THEN
    IF p_value REGEXP v_unsafe THEN
      SET v_message = CONCAT(p_where, ': ', p_field,
        ' must not contain control characters, line or paragraph separators, bidi formatting or invisible format characters');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_message;
    END IF;
    SET v_address = p_value;
    IF p_kind = 'mailbox' THEN
      CALL email_internal_split_mailbox(p_value, v_name, v_address);
    END IF;
    IF v_name IS NOT NULL THEN
      IF CHAR_LENGTH(v_name) >= 2 AND LEFT(v_name, 1) = '"' AND RIGHT(v_name, 1) = '"' THEN
        SET v_name = SUBSTRING(v_name, 2, CHAR_LENGTH(v_name) - 2);
      ELSEIF v_name REGEXP '[,;]' THEN
        SET v_name = '"';
      END IF;
      -- An @ in the name makes it read as an address: `security@paypal.com <shop@example.com>` shows
      -- the reader a sender (or recipient) that is not the one the mail goes from (or to).
      IF CHAR_LENGTH(v_name) > 256 OR v_name REGEXP '[<>"@]'
         OR LOCATE(CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin, v_name) > 0 THEN
        SET v_message = CONCAT(p_where, ': ', p_field,
          ' display name must be at most 256 characters with no angle bracket, quote, backslash or @',
          ' (a name must not read as an address); put one with a comma or semicolon in double quotes');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
      END IF;
    END IF;
    IF p_kind IN ('address', 'mailbox') AND (
         CHAR_LENGTH(v_address) > 320
         OR CHAR_LENGTH(v_address) - CHAR_LENGTH(REPLACE(v_address, '@', '')) <> 1
         OR LEFT(v_address, 1) = '@' OR RIGHT(v_address, 1) = '@'
         OR v_address REGEXP '[ ,;<>"()]' OR LOCATE(CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin, v_address) > 0
         OR v_address REGEXP v_joiner) THEN
      SET v_message = CONCAT(p_where, ': ', p_field,
        IF(p_kind = 'mailbox', ' must be an address, alone or as Name <address>:', ' must be one bare address:'),
        ' at most 320 characters, exactly one @ between text, and no space, comma,',
        ' semicolon, quote, parenthesis, backslash, angle bracket or zero width joiner');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = v_message;
    END IF;
  END IF;
END
