-- Operator: change a tenant's settings: a JSON object of the members to change, the others kept.
-- weight (1 to 1000: its share of sends when several tenants have due rows), max_priority (0 to 9:
-- the highest priority its messages may ask for), send_rate (sends per second), daily_quota (sends
-- per 24 hours) and max_waiting_rows (Pending and Retrying rows; an enqueue past it is refused with
-- 45013), each null for none, ses_tenant_name (SES's tenant: its sends carry TenantName, its sending
-- status is read), accounts (the database user names that may use it, '*' for every account:
-- replaces the list) and default_for (accounts whose messages naming no tenant go to it). Logged like
-- email_tenant_add. Commits its own transaction. Result: affected (1 changed, 0 no such tenant).
CREATE PROCEDURE email_tenant_set(
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_settings LONGTEXT CHARACTER SET utf8mb4,
  IN p_changed_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id INT UNSIGNED DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_tenant_change('email_tenant_set', p_name, p_changed_by, p_reason);
  START TRANSACTION;
  SELECT id INTO v_id FROM email_tenants WHERE name = p_name FOR UPDATE;
  IF v_id IS NOT NULL THEN
    CALL email_internal_tenant_apply('email_tenant_set', v_id, p_settings);
    UPDATE email_tenants SET updated_at = v_now, row_version = row_version + 1 WHERE id = v_id;
    CALL email_internal_log_tenant_change(v_now, 'set', p_name, p_settings, p_changed_by, p_reason);
  END IF;
  COMMIT;
  SELECT IF(v_id IS NULL, 0, 1) AS affected;
END
