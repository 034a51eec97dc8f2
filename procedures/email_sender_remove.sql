-- Operator: stop allowing a sender (exactly as it was added: the address or '@domain', and the
-- account, '' for all). Emails already enqueued are not touched. Logged like email_sender_add.
-- Commits its own transaction. Result: affected (1 removed, 0 it was not on the list).
CREATE PROCEDURE email_sender_remove(
  IN p_sender TEXT CHARACTER SET utf8mb4,
  IN p_account TEXT CHARACTER SET utf8mb4,
  IN p_removed_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_account VARCHAR(300) CHARACTER SET utf8mb4 DEFAULT COALESCE(p_account, '');
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_sender_change('email_sender_remove', p_sender, v_account, p_removed_by, p_reason);
  START TRANSACTION;
  DELETE FROM email_allowed_senders
   WHERE sender = p_sender COLLATE utf8mb4_unicode_ci AND account = v_account COLLATE utf8mb4_bin;
  SET v_affected = ROW_COUNT();
  IF v_affected > 0 THEN
    CALL email_internal_log_sender_change(v_now, 'remove', p_sender, v_account, p_removed_by, p_reason);
  END IF;
  COMMIT;
  SELECT v_affected AS affected;
END
