-- Operator: allow a sender, an address ('billing@example.com') or a whole domain ('@example.com'), for
-- every enqueuing account (p_account '' or NULL) or for one database user name. Logged with the
-- operator's name, the calling account and the reason. Commits its own transaction: call it with
-- autocommit on, not inside yours. Result: affected (1 added, 0 it was already allowed).
CREATE PROCEDURE email_sender_add(
  IN p_sender TEXT CHARACTER SET utf8mb4,
  IN p_account TEXT CHARACTER SET utf8mb4,
  IN p_added_by TEXT CHARACTER SET utf8mb4,
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
  CALL email_internal_check_sender_change('email_sender_add', p_sender, v_account, p_added_by, p_reason);
  START TRANSACTION;
  INSERT IGNORE INTO email_allowed_senders (sender, account, added_at, added_by, added_via, reason)
  VALUES (p_sender, v_account, v_now, p_added_by, SESSION_USER(), p_reason);
  SET v_affected = ROW_COUNT();
  IF v_affected > 0 THEN
    CALL email_internal_log_sender_change(v_now, 'add', p_sender, v_account, p_added_by, p_reason);
  END IF;
  COMMIT;
  SELECT v_affected AS affected;
END
