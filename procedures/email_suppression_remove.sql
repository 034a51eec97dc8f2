-- Operator: take an address off the suppression list (compared as on adding: the domain
-- case-insensitively; an erased address by its keyed hash). Emails already Failed as 'Suppressed'
-- stay Failed; new ones are sent again.
-- Logged like email_suppression_add. Result: affected (1 removed, 0 it was not on the list).
CREATE PROCEDURE email_suppression_remove(
  IN p_address TEXT CHARACTER SET utf8mb4,
  IN p_removed_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_key VARCHAR(320) CHARACTER SET utf8mb4;
  DECLARE v_new_erased_key VARCHAR(72) CHARACTER SET utf8mb4;
  DECLARE v_address VARCHAR(320) CHARACTER SET utf8mb4;
  DECLARE v_was VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_address = NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_address IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = 'email_suppression_remove: address is required';
  END IF;
  CALL email_internal_check_text('email_suppression_remove', 'address', p_address, 'address');
  CALL email_internal_check_name('email_suppression_remove', 'removed_by', p_removed_by, 191);
  CALL email_internal_check_name('email_suppression_remove', 'reason', p_reason, 2000);
  CALL email_internal_address_key(p_address, v_key);
  CALL email_internal_begin(v_own);
  SELECT address, reason INTO v_address, v_was FROM email_suppressed_addresses
   WHERE address_key = v_key COLLATE utf8mb4_bin FOR UPDATE;
  IF v_address IS NULL THEN
    -- An erased address is on the list by its keyed hash (under any key held); its entry and this
    -- log line keep no address.
    CALL email_internal_erased_key(p_address, v_new_erased_key, v_key);
    SELECT address, reason INTO v_address, v_was FROM email_suppressed_addresses
     WHERE address_key = v_key COLLATE utf8mb4_bin FOR UPDATE;
  END IF;
  IF v_address IS NOT NULL THEN
    DELETE FROM email_suppressed_addresses WHERE address_key = v_key COLLATE utf8mb4_bin;
    SET v_affected = ROW_COUNT();
    INSERT INTO email_suppressed_addresses_log (occurred_at, action, address, reason, actor, db_account, detail)
    VALUES (v_now, 'remove', v_address, v_was, p_removed_by, SESSION_USER(), p_reason);
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected;
END
