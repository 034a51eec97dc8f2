-- Internal: the tenant of a new row (email_internal_enqueue). p_tenant NULL: the calling account's
-- default tenant, else the shared default (id 1). Refuses with 45012 (tenant_not_allowed) a tenant the
-- account may not use (or that does not exist: the answer does not tell which) and a priority above
-- the tenant's highest, and with 45013 (quota_exceeded) a row past its cap on waiting rows, naming
-- the cap. A message with no priority gets 5, or the tenant's highest if that is lower. Reads only, no locking read: a cap may be passed by the enqueues running at that moment.
CREATE PROCEDURE email_internal_enqueue_tenant(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_account VARCHAR(128) CHARACTER SET utf8mb4,
  IN p_tenant TEXT CHARACTER SET utf8mb4,
  INOUT p_priority BIGINT,
  OUT p_tenant_id INT UNSIGNED
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;
  DECLARE v_max_priority TINYINT UNSIGNED DEFAULT 9;
  DECLARE v_cap BIGINT DEFAULT NULL;
  DECLARE v_waiting BIGINT DEFAULT 0;
  SET p_tenant_id = NULL;
  IF p_tenant IS NULL THEN
    SELECT MIN(tenant_id) INTO p_tenant_id FROM email_tenant_accounts
     WHERE account = p_account COLLATE utf8mb4_bin AND is_default = 1;
    SET p_tenant_id = COALESCE(p_tenant_id, 1);
  ELSE
    CALL email_internal_check_tenant_name(p_where, 'tenant', p_tenant);
    SELECT MIN(t.id) INTO p_tenant_id
      FROM email_tenants t
      JOIN email_tenant_accounts a ON a.tenant_id = t.id AND a.account IN (p_account COLLATE utf8mb4_bin, '*')
     WHERE t.name = p_tenant;
    IF p_tenant_id IS NULL THEN
      SET v_message = CONCAT(p_where, ': tenant ', p_tenant, ' is not one this account may use');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45012, MESSAGE_TEXT = v_message;
    END IF;
  END IF;
  SELECT max_priority, max_waiting_rows INTO v_max_priority, v_cap FROM email_tenants WHERE id = p_tenant_id;
  SET p_priority = COALESCE(p_priority, LEAST(5, v_max_priority));
  IF p_priority > v_max_priority THEN
    SET v_message = CONCAT(p_where, ': priority ', p_priority, ' is above tenant ',
                           COALESCE(p_tenant, '(default)'), '''s highest, ', v_max_priority);
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45012, MESSAGE_TEXT = v_message;
  END IF;
  IF v_cap IS NOT NULL THEN
    -- At most cap entries read, on the index of claimable rows.
    SELECT COUNT(*) INTO v_waiting FROM (
      SELECT 1 FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_tenant_due)
       WHERE claim_tenant = p_tenant_id LIMIT v_cap) w;
    IF v_waiting >= v_cap THEN
      SET v_message = CONCAT(p_where, ': tenant ', COALESCE(p_tenant, '(default)'), ' has ', v_waiting,
                             ' waiting rows, its cap (max_waiting_rows ', v_cap, ')');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45013, MESSAGE_TEXT = v_message;
    END IF;
  END IF;
END
