-- Operator: remove a tenant that has no waiting rows (Pending, Retrying or Processing: refused with
-- 45001 while it has any, which would never be claimed again) and is not the shared default. Its
-- finished rows keep its id. Logged like email_tenant_add. Commits its own transaction. Result:
-- affected (1 removed, 0 no such tenant).
CREATE PROCEDURE email_tenant_remove(
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_removed_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id INT UNSIGNED DEFAULT NULL;
  DECLARE v_open BIGINT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_tenant_change('email_tenant_remove', p_name, p_removed_by, p_reason);
  START TRANSACTION;
  SELECT id INTO v_id FROM email_tenants WHERE name = p_name FOR UPDATE;
  IF v_id = 1 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001,
      MESSAGE_TEXT = 'email_tenant_remove: name: the shared default tenant cannot be removed';
  END IF;
  IF v_id IS NOT NULL THEN
    SELECT COUNT(*) INTO v_open FROM (
      SELECT 1 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_tenant_due)
       WHERE claim_tenant = v_id LIMIT 1) w;
    IF v_open = 0 THEN
      SELECT COUNT(*) INTO v_open FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_lease)
       WHERE status = 'Processing' AND tenant_id = v_id;
    END IF;
    IF v_open > 0 THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001,
        MESSAGE_TEXT = 'email_tenant_remove: name: the tenant still has waiting rows (cancel them or let them go out first)';
    END IF;
    DELETE FROM email_tenant_accounts WHERE tenant_id = v_id;
    DELETE FROM email_tenants WHERE id = v_id;
    CALL email_internal_log_tenant_change(v_now, 'remove', p_name, NULL, p_removed_by, p_reason);
  END IF;
  COMMIT;
  SELECT IF(v_id IS NULL, 0, 1) AS affected;
END
