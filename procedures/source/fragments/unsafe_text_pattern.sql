-- The characters no header or log field may hold, as a REGEXP: C0/C1 controls, DEL, line and paragraph
-- separators, bidi formatting and invisible format characters. \x{...} escapes mean the same to
-- MariaDB's PCRE2 and MySQL 8's ICU. The backslash is spelt CHAR(92): a backslash in the source would
-- be unescaped in the stored definition, which the drift check then sees as a different body.
REPLACE(
  '[~x{0}-~x{1F}~x{7F}-~x{9F}~x{2028}~x{2029}~x{202A}-~x{202E}~x{2066}-~x{2069}~x{200E}~x{200F}~x{61C}~x{AD}~x{180E}~x{200B}~x{2060}-~x{2064}~x{206A}-~x{206F}~x{FEFF}~x{FFF9}-~x{FFFB}]',
  '~', CHAR(92 USING utf8mb4) COLLATE utf8mb4_bin)
