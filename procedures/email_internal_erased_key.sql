-- Internal: the keyed hash an erased address is known by (email_erase_address): '#' and the SHA-256
-- of the installation's erasure secret (email_outbox_secrets, readable by no role) and the address
-- lower-cased, 65 characters. The suppression checks look an address up by its address key and by
-- this, so an erased address stays suppressed with nothing in any table that reads back as it.
-- Lower-cased whole: erasure treats the address case-insensitively, so every spelling stays suppressed.
-- NULL stays NULL.
CREATE PROCEDURE email_internal_erased_key(
  IN p_address TEXT CHARACTER SET utf8mb4,
  OUT p_key VARCHAR(65) CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_secret VARCHAR(64) CHARACTER SET ascii DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_secret = NULL;
  SET p_key = NULL;
  IF p_address IS NOT NULL THEN
    SELECT HEX(secret) INTO v_secret FROM email_outbox_secrets WHERE name = 'erasure';
    IF v_secret IS NOT NULL THEN
      SET p_key = CONCAT('#', SHA2(CONCAT(v_secret, ':', LOWER(p_address)), 256));
    END IF;
  END IF;
END
