-- Operator: stop allowing messages to name an SES configuration set. Emails already enqueued keep it.
-- Logged like email_configuration_set_add. Commits its own transaction. Result: affected (1 removed,
-- 0 it was not on the list).
CREATE PROCEDURE email_configuration_set_remove(
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_removed_by TEXT CHARACTER SET utf8mb4,
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
  CALL email_internal_check_configuration_set_change('email_configuration_set_remove', p_name, p_removed_by, p_reason);
  START TRANSACTION;
  DELETE FROM email_allowed_configuration_sets WHERE name = CONVERT(p_name USING ascii);
  SET v_affected = ROW_COUNT();
  IF v_affected > 0 THEN
    INSERT INTO email_allowed_configuration_sets_log (occurred_at, action, name, actor, db_account, reason)
    VALUES (v_now, 'remove', p_name, p_removed_by, SESSION_USER(), p_reason);
  END IF;
  COMMIT;
  SELECT v_affected AS affected;
END
