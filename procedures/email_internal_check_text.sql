-- The one rule set for every text that becomes a mail header or a log field (docs/security.md).
-- p_kind 'text': no C0 or C1 control (TAB, CR and LF included), no DEL, no U+2028/U+2029, no bidi
-- formatting character (U+061C, U+200E/F, U+202A-E, U+2066-9). p_kind 'address': the same, and one
-- bare address: at most 320 characters, exactly one @ with text on both sides, no space, comma,
-- semicolon, quote, parenthesis, backslash or angle bracket. NULL passes: callers decide what is required.
-- Raises 45000 naming p_where and p_field; writes nothing. A procedure, not a function: creating
-- functions with the binary log on needs SUPER.
CREATE PROCEDURE email_internal_check_text(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_field VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_value LONGTEXT CHARACTER SET utf8mb4,
  IN p_kind VARCHAR(16) CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(512) CHARACTER SET utf8mb4;
  -- \x{...} escapes mean the same to MariaDB's PCRE2 and MySQL 8's ICU. The backslash is spelt
  -- CHAR(92): a backslash in the source would be unescaped in the stored definition, which the
  -- drift check then sees as a different body.
  DECLARE v_unsafe VARCHAR(200) CHARACTER SET utf8mb4 DEFAULT REPLACE(
    '[~x{0}-~x{1F}~x{7F}-~x{9F}~x{2028}~x{2029}~x{202A}-~x{202E}~x{2066}-~x{2069}~x{200E}~x{200F}~x{61C}]',
    '~', CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin);
  IF p_value IS NOT NULL THEN
    IF p_value REGEXP v_unsafe THEN
      SET v_message = CONCAT(p_where, ': ', p_field,
        ' must not contain control characters, line or paragraph separators, or bidi formatting characters');
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
    END IF;
    IF p_kind = 'address' AND (
         CHAR_LENGTH(p_value) > 320
         OR CHAR_LENGTH(p_value) - CHAR_LENGTH(REPLACE(p_value, '@', '')) <> 1
         OR LEFT(p_value, 1) = '@' OR RIGHT(p_value, 1) = '@'
         OR p_value REGEXP '[ ,;<>"()]' OR LOCATE(CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin, p_value) > 0) THEN
      SET v_message = CONCAT(p_where, ': ', p_field,
        ' must be one bare address: at most 320 characters, exactly one @ between text, and no space, comma,',
        ' semicolon, quote, parenthesis, backslash or angle bracket');
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
    END IF;
  END IF;
END
