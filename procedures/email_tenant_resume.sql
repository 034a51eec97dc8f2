-- Operator: resume a tenant: lifts its pause, whoever set it (an operator, SES's DISABLED sending
-- status, a SendingPausedException), and its reputation guard. A tenant SES still reports DISABLED is
-- paused again at the next read of its status. Logged like email_tenant_add. Commits its own
-- transaction. Result: affected (1 resumed, 0 no such tenant or nothing held it), paused_reason and
-- guard_below_priority as they were.
CREATE PROCEDURE email_tenant_resume(
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_resumed_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_paused VARCHAR(32) DEFAULT NULL;
  DECLARE v_guard TINYINT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_tenant_change('email_tenant_resume', p_name, p_resumed_by, p_reason);
  START TRANSACTION;
  SELECT paused_reason, guard_below_priority INTO v_paused, v_guard FROM email_tenants WHERE name = p_name FOR UPDATE;
  UPDATE email_tenants
     SET paused_reason = NULL, paused_at = NULL, guard_below_priority = NULL, guard_at = NULL,
         guard_reason = NULL, guard_lifted_at = v_now, updated_at = v_now, row_version = row_version + 1
   WHERE name = p_name AND (paused_reason IS NOT NULL OR guard_below_priority IS NOT NULL);
  SET v_affected = ROW_COUNT();
  IF v_affected > 0 THEN
    CALL email_internal_log_tenant_change(v_now, 'resume', p_name,
      CONCAT_WS(', ', CONCAT('paused: ', v_paused), CONCAT('guard below priority ', v_guard)), p_resumed_by, p_reason);
  END IF;
  COMMIT;
  SELECT v_affected AS affected, v_paused AS paused_reason, v_guard AS guard_below_priority;
END
