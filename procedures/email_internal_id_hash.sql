-- Internal: the key a notification id is kept by in email_notification_tombstones, once its row is
-- deleted (email_retention) or its id replaced (email_erase_address): HMAC-SHA256 (RFC 2104) under the
-- installation's secret (email_outbox_secrets 'erasure', readable by no role) of 'notification_id:'
-- and the id, so an id guessed from an address (`welcome:ann@example.com`) cannot be confirmed by
-- hashing it. Tombstones written before 0.2.0 hold a plain SHA-256 of the id; email_internal_enqueue
-- looks both up while they last. Without a secret (a database not yet migrated to 0014) the plain
-- SHA-256. NULL stays NULL.
CREATE PROCEDURE email_internal_id_hash(
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  OUT p_hash BINARY(32)
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_key BINARY(32) DEFAULT NULL;
  DECLARE v_inner VARBINARY(64);
  DECLARE v_outer VARBINARY(64);
  DECLARE v_i INT DEFAULT 0;
  DECLARE v_word BIGINT UNSIGNED;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_key = NULL;
  SET p_hash = NULL;
  IF p_notification_id IS NOT NULL THEN
    SELECT secret INTO v_key FROM email_outbox_secrets WHERE name = 'erasure';
    IF v_key IS NULL THEN
      SET p_hash = UNHEX(SHA2(p_notification_id, 256));
    ELSE
      -- The key padded with zeros to SHA-256's 64-byte block, XORed with 0x36 (inner) and 0x5c
      -- (outer): its 32 bytes 8 at a time (the server XORs integers, not strings), the zeros as the
      -- pad bytes themselves.
      SET v_inner = '', v_outer = '';
      WHILE v_i < 4 DO
        SET v_word = CAST(CONV(HEX(SUBSTRING(v_key, 8 * v_i + 1, 8)), 16, 10) AS UNSIGNED);
        SET v_inner = CONCAT(v_inner, UNHEX(LPAD(HEX(v_word ^ 3906369333256140342), 16, '0'))),
            v_outer = CONCAT(v_outer, UNHEX(LPAD(HEX(v_word ^ 6655295901103053916), 16, '0')));
        SET v_i = v_i + 1;
      END WHILE;
      SET v_inner = CONCAT(v_inner, UNHEX(REPEAT('36', 32))), v_outer = CONCAT(v_outer, UNHEX(REPEAT('5C', 32)));
      SET p_hash = UNHEX(SHA2(CONCAT(v_outer, UNHEX(SHA2(CONCAT(v_inner, CONVERT(CONCAT('notification_id:', p_notification_id)
                                                                                  USING utf8mb4)), 256))), 256));
    END IF;
  END IF;
END
