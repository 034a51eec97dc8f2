-- Operator: add a tenant, a share of the outbox for one or more services (docs/design.md, "Tenants"):
-- its name (SES's rule: 1 to 64 of A-Za-z0-9_-) and its settings, a JSON object whose members are
-- those of email_tenant_set (weight 1, max_priority 9, no limits, no SES tenant name, no accounts
-- when absent). Logged with the operator's name, the calling account and the reason. Commits its own
-- transaction: call it with autocommit on. Result: affected (1 added, 0 a tenant of that name exists:
-- nothing changed).
CREATE PROCEDURE email_tenant_add(
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_settings LONGTEXT CHARACTER SET utf8mb4,
  IN p_added_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_id INT UNSIGNED;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_tenant_change('email_tenant_add', p_name, p_added_by, p_reason);
  START TRANSACTION;
  INSERT IGNORE INTO email_tenants (name, created_at, updated_at) VALUES (p_name, v_now, v_now);
  SET v_affected = ROW_COUNT();
  IF v_affected > 0 THEN
    SET v_id = LAST_INSERT_ID();
    CALL email_internal_tenant_apply('email_tenant_add', v_id, COALESCE(p_settings, '{}'));
    CALL email_internal_log_tenant_change(v_now, 'add', p_name, p_settings, p_added_by, p_reason);
  END IF;
  COMMIT;
  SELECT v_affected AS affected;
END
