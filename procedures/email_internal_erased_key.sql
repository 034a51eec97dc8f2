-- Internal: the keyed hashes an erased address is known by on the suppression list
-- (email_erase_address), with nothing in any table that reads back as it. p_new_key: the form a new
-- entry is written in, '#', the newest erasure key's id (email_outbox_keys, readable by no role), ':'
-- and the HMAC-SHA256 (hex) of 'address:' and the address lower-cased under that key. p_listed_key:
-- the entry already on the list for the address under any key still held, in that form or in the
-- pre-0.2.0 form of the legacy key ('#' and the SHA-256 of the key's hex, ':' and the address), else
-- NULL. One index lookup per key (there are one or two). Lower-cased whole: erasure treats the address
-- case-insensitively, so every spelling stays suppressed. NULL stays NULL.
CREATE PROCEDURE email_internal_erased_key(
  IN p_address TEXT CHARACTER SET utf8mb4,
  OUT p_new_key VARCHAR(72) CHARACTER SET utf8mb4,
  OUT p_listed_key VARCHAR(72) CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_message LONGBLOB;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET p_listed_key = NULL;
  SET p_new_key = NULL, p_listed_key = NULL;
  IF p_address IS NOT NULL THEN
    SET v_message = CONVERT(CONCAT('address:', LOWER(p_address)) USING utf8mb4);
    -- The pads are the key XORed with HMAC's ipad and opad (stored generated columns, migration 0018).
    SELECT CONCAT('#', id, ':', SHA2(CONCAT(outer_pad, UNHEX(SHA2(CONCAT(inner_pad, v_message), 256))), 256))
      INTO p_new_key
      FROM email_outbox_keys ORDER BY id DESC LIMIT 1;
    SELECT s.address_key INTO p_listed_key
      FROM email_outbox_keys k
           STRAIGHT_JOIN email_suppressed_addresses s
             ON s.address_key IN (
                  CONCAT('#', k.id, ':', SHA2(CONCAT(k.outer_pad, UNHEX(SHA2(CONCAT(k.inner_pad, v_message), 256))), 256)) COLLATE utf8mb4_bin,
                  IF(k.legacy = 1, CONCAT('#', SHA2(CONCAT(HEX(k.secret), ':', LOWER(p_address)), 256)), NULL) COLLATE utf8mb4_bin)
     LIMIT 1;
  END IF;
END
