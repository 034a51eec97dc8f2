-- Internal: whether a notification id of an account (or of '', the ids of before per-account ids) has
-- a live tombstone (keep_until on or after p_today): under any erasure key still held
-- (email_internal_id_hash spells the form), or as the plain SHA-256 tombstones written before 0.2.0
-- hold until they expire. One index lookup per key (there are one or two). A locking read, as
-- email_internal_enqueue needs (see there why), of the keys too: a key added meanwhile is seen.
CREATE PROCEDURE email_internal_id_tombstoned(
  IN p_account VARCHAR(300) CHARACTER SET utf8mb4,
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  IN p_today DATE,
  OUT p_found INT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  SELECT COUNT(*) INTO p_found FROM email_notification_tombstones
   WHERE account IN (p_account, '') AND id_hash = UNHEX(SHA2(p_notification_id, 256)) AND keep_until >= p_today
   LOCK IN SHARE MODE;
  IF p_found = 0 THEN
    SELECT COUNT(*) INTO p_found
      FROM email_outbox_keys k
           STRAIGHT_JOIN email_notification_tombstones t
             ON t.account IN (p_account, '')
            AND t.id_hash = UNHEX({{>erasure_hmac | message = CONVERT(CONCAT('notification_id:', p_notification_id) USING utf8mb4) | keys = k.}})
     WHERE t.keep_until >= p_today
     LOCK IN SHARE MODE;
  END IF;
END
