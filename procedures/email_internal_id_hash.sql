-- Internal: the key a notification id is kept by in email_notification_tombstones, once its row is
-- deleted (email_retention) or its id replaced (email_erase_address): HMAC-SHA256 (RFC 2104) of
-- 'notification_id:' and the id under the newest erasure key (email_outbox_keys, readable by no role),
-- and that key's id, which the tombstone records. An id guessed from an address
-- (`welcome:ann@example.com`) cannot be confirmed without the key. email_internal_id_tombstoned looks
-- an id up under every key still held. Without a key (a database not yet migrated to 0018) the plain
-- SHA-256 and no key id. NULL stays NULL.
CREATE PROCEDURE email_internal_id_hash(
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  OUT p_key_id SMALLINT UNSIGNED,
  OUT p_hash BINARY(32)
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET p_key_id = NULL;
  SET p_hash = NULL, p_key_id = NULL;
  IF p_notification_id IS NOT NULL THEN
    -- The pads are the key XORed with HMAC's ipad and opad (stored generated columns, migration 0018).
    SELECT id, UNHEX(SHA2(CONCAT(outer_pad, UNHEX(SHA2(CONCAT(inner_pad, CONVERT(CONCAT('notification_id:', p_notification_id) USING utf8mb4)), 256))), 256))
      INTO p_key_id, p_hash
      FROM email_outbox_keys ORDER BY id DESC LIMIT 1;
    IF p_key_id IS NULL THEN
      SET p_hash = UNHEX(SHA2(p_notification_id, 256));
    END IF;
  END IF;
END
