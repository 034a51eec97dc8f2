-- Adds an erasure key (email_outbox_keys): 32 bytes the server makes (RANDOM_BYTES), so no statement
-- a client sends holds them. New tombstones of notification ids and new entries of erased addresses
-- are keyed by it from the commit on; the keys before it are retired (still read by every lookup,
-- each costing one HMAC per lookup, until dropped: docs/security.md, "Where the erasure keys live").
-- Operators and the migrator may call it. On a server without RANDOM_BYTES (MariaDB before 10.10)
-- the call fails and nothing is written. Result: key_id (the new key), keys_held.
CREATE PROCEDURE email_erasure_key_rotate(
  IN p_rotated_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  -- A local variable, not the expression in the INSERT: with binlog_format=STATEMENT the server then
  -- logs the value (so replicas hold the same key) instead of running RANDOM_BYTES again on each.
  DECLARE v_secret BINARY(32);
  DECLARE v_key_id SMALLINT UNSIGNED;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_check_name('email_erasure_key_rotate', 'rotated_by', p_rotated_by, 191);
  CALL email_internal_check_name('email_erasure_key_rotate', 'reason', p_reason, 2000);
  SET v_secret = RANDOM_BYTES(32);
  CALL email_internal_begin(v_own);
  INSERT INTO email_outbox_keys (secret, created_at, created_by, db_account, reason)
  VALUES (v_secret, v_now, p_rotated_by, SESSION_USER(), p_reason);
  SET v_key_id = LAST_INSERT_ID(), v_secret = NULL;
  UPDATE email_outbox_keys SET retired_at = v_now WHERE id < v_key_id AND retired_at IS NULL;
  CALL email_internal_end(v_own);
  SELECT v_key_id AS key_id, (SELECT COUNT(*) FROM email_outbox_keys) AS keys_held;
END
