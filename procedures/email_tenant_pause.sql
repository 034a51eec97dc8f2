-- Operator: pause a tenant: nothing of it is claimed until email_tenant_resume; its rows wait, no
-- attempt used, and the other tenants take its share. Logged like email_tenant_add. Commits its own
-- transaction. Result: affected (1 paused, 0 no such tenant or already paused by an operator).
CREATE PROCEDURE email_tenant_pause(
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_paused_by TEXT CHARACTER SET utf8mb4,
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
  CALL email_internal_check_tenant_change('email_tenant_pause', p_name, p_paused_by, p_reason);
  START TRANSACTION;
  UPDATE email_tenants
     SET paused_reason = 'operator', paused_at = v_now, updated_at = v_now, row_version = row_version + 1
   WHERE name = p_name AND (paused_reason IS NULL OR paused_reason <> 'operator');
  SET v_affected = ROW_COUNT();
  IF v_affected > 0 THEN
    CALL email_internal_log_tenant_change(v_now, 'pause', p_name, NULL, p_paused_by, p_reason);
  END IF;
  COMMIT;
  SELECT v_affected AS affected;
END
