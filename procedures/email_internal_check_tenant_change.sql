-- Internal: the arguments every operator's change of a tenant takes (email_tenant_add, _set, _pause,
-- _resume, _remove), checked once for all: the tenant's name by SES's rule, who and why.
CREATE PROCEDURE email_internal_check_tenant_change(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_name TEXT CHARACTER SET utf8mb4,
  IN p_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  CALL email_internal_check_tenant_name(p_where, 'name', p_name);
  CALL email_internal_check_name(p_where, 'by', p_by, 191);
  CALL email_internal_check_name(p_where, 'reason', p_reason, 500);
END
