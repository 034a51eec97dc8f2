-- Internal: the one writer of the suppression list and its log, inside the caller's unit of work.
-- Puts p_address on the list (compared by email_internal_address_key) unless it is already there.
-- p_added: 1 when it was added.
CREATE PROCEDURE email_internal_suppress_address(
  IN p_now DATETIME(6),
  IN p_address VARCHAR(320) CHARACTER SET utf8mb4,
  IN p_reason VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_detail VARCHAR(2000) CHARACTER SET utf8mb4,
  IN p_provider_event_id BIGINT UNSIGNED,
  IN p_attempt_id BIGINT UNSIGNED,
  IN p_ses_message_id VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_by VARCHAR(191) CHARACTER SET utf8mb4,
  OUT p_added INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_key VARCHAR(320) CHARACTER SET utf8mb4;
  DECLARE v_erased_key VARCHAR(72) CHARACTER SET utf8mb4;
  DECLARE v_new_erased_key VARCHAR(72) CHARACTER SET utf8mb4;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  SET p_added = 0;
  CALL email_internal_address_key(p_address, v_key);
  -- Erased (email_erase_address) is already suppressed: writing it again would put it back in clear.
  CALL email_internal_erased_key(p_address, v_new_erased_key, v_erased_key);
  IF v_erased_key IS NOT NULL THEN
    SET v_duplicate = 1;
  ELSE
    INSERT INTO email_suppressed_addresses
      (address_key, address, reason, detail, provider_event_id, attempt_id, ses_message_id, added_at, added_by, added_via)
    VALUES
      (v_key, p_address, p_reason, p_detail, p_provider_event_id, p_attempt_id, p_ses_message_id, p_now, p_by, SESSION_USER());
  END IF;
  IF v_duplicate = 0 THEN
    SET p_added = 1;
    INSERT INTO email_suppressed_addresses_log (occurred_at, action, address, reason, actor, db_account, detail)
    VALUES (p_now, 'add', p_address, p_reason, p_by, SESSION_USER(), p_detail);
  END IF;
END
