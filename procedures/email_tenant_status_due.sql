-- Worker: take this replica's turn to read SES's sending status (GetTenant) of the tenants with an SES
-- tenant name not read, nor taken by a replica, for p_refresh_seconds: one UPDATE hands each name to
-- one caller, so one replica at a time reads it. Report each read with email_tenant_sending_paused.
-- Result: ses_tenant_name, one row per name to read now (none: nothing due).
CREATE PROCEDURE email_tenant_status_due(
  IN p_worker TEXT CHARACTER SET utf8mb4,
  IN p_refresh_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  IF p_refresh_seconds IS NULL OR p_refresh_seconds < 1 OR p_refresh_seconds > 86400 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001,
      MESSAGE_TEXT = 'email_tenant_status_due: refresh_seconds must be 1 to 86400';
  END IF;
  CALL email_internal_check_name('email_tenant_status_due', 'worker', p_worker, 191);
  -- The turn is taken with the time itself: a row this call changed has exactly v_now.
  UPDATE email_tenants
     SET ses_check_taken_at = v_now
   WHERE ses_tenant_name IS NOT NULL
     AND (ses_check_taken_at IS NULL OR ses_check_taken_at <= v_now - INTERVAL p_refresh_seconds SECOND);
  SELECT DISTINCT ses_tenant_name FROM email_tenants WHERE ses_check_taken_at = v_now ORDER BY ses_tenant_name;
END
