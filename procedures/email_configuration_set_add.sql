-- Operator: allow messages to name an SES configuration set (email_enqueue_message's
-- configuration_set). Only sets on this list may be named: a set with no event destination would hide
-- a message's bounces and complaints from the suppression list. Logged with the operator's name, the
-- calling account and the reason in email_allowed_configuration_sets_log. Commits its own transaction.
-- Result: affected (1 added, 0 it was already on the list).
CREATE PROCEDURE email_configuration_set_add(
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_added_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_configuration_set_change('email_configuration_set_add', p_name, p_added_by, p_reason);
  START TRANSACTION;
  INSERT IGNORE INTO email_allowed_configuration_sets (name, added_at, added_by, added_via, reason)
  VALUES (p_name, v_now, p_added_by, SESSION_USER(), p_reason);
  SET v_affected = ROW_COUNT();
  IF v_affected > 0 THEN
    INSERT INTO email_allowed_configuration_sets_log (occurred_at, action, name, actor, db_account, reason)
    VALUES (v_now, 'add', p_name, p_added_by, SESSION_USER(), p_reason);
  END IF;
  COMMIT;
  SELECT v_affected AS affected;
END
