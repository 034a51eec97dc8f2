-- Internal: the one writer of email_tenants_log, inside the change it records. p_by is the name the
-- operator gave; db_account is the server's word for the account that called.
CREATE PROCEDURE email_internal_log_tenant_change(
  IN p_occurred_at DATETIME(6),
  IN p_action VARCHAR(32) CHARACTER SET utf8mb4,
  IN p_name VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_detail TEXT CHARACTER SET utf8mb4,
  IN p_by VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_reason VARCHAR(500) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  INSERT INTO email_tenants_log (occurred_at, action, name, detail, actor, db_account, reason)
  VALUES (p_occurred_at, p_action, p_name, p_detail, p_by, SESSION_USER(), p_reason);
END
