-- Worker: SES paused a tenant's sending (GetTenant read SendingStatus DISABLED, p_reason
-- 'ses-disabled'; a SendEmail naming it was refused with SendingPausedException, p_reason
-- 'ses-sending-paused'): every outbox tenant with that SES tenant name is paused, so its rows wait
-- with no attempt used while the other tenants go on. p_status_read 1 (a GetTenant read) also records
-- the status read and when; with SendingStatus ENABLED or REINSTATED pass p_reason NULL: a pause SES
-- caused is lifted (an operator's pause stays). Logged once, when it changes something. Result:
-- affected (tenants whose pause changed).
CREATE PROCEDURE email_tenant_sending_paused(
  IN p_ses_tenant_name TEXT CHARACTER SET utf8mb4,
  IN p_reason VARCHAR(32) CHARACTER SET utf8mb4,
  IN p_reported_by TEXT CHARACTER SET utf8mb4,
  IN p_detail TEXT CHARACTER SET utf8mb4,
  IN p_status_read VARCHAR(16) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;
  DECLARE v_name VARCHAR(64) CHARACTER SET ascii;
  DECLARE v_done INT DEFAULT 0;
  DECLARE c_names CURSOR FOR
    SELECT name FROM email_tenants
     WHERE ses_tenant_name = p_ses_tenant_name
       AND ((p_reason IS NOT NULL AND paused_reason IS NULL)
            OR (p_reason IS NULL AND paused_reason IN ('ses-disabled', 'ses-sending-paused')));
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  CALL email_internal_check_tenant_name('email_tenant_sending_paused', 'ses_tenant_name', p_ses_tenant_name);
  IF p_reason IS NOT NULL AND p_reason NOT IN ('ses-disabled', 'ses-sending-paused') THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001,
      MESSAGE_TEXT = 'email_tenant_sending_paused: reason must be ses-disabled, ses-sending-paused or NULL (lift)';
  END IF;
  CALL email_internal_check_name('email_tenant_sending_paused', 'reported_by', p_reported_by, 191);
  CALL email_internal_check_text('email_tenant_sending_paused', 'detail', p_detail, 'text');
  START TRANSACTION;
  OPEN c_names;
  names: LOOP
    FETCH c_names INTO v_name;
    IF v_done = 1 THEN
      LEAVE names;
    END IF;
    CALL email_internal_log_tenant_change(v_now, IF(p_reason IS NULL, 'ses-resumed', 'ses-paused'), v_name,
      CONCAT_WS(': ', COALESCE(p_reason, 'SES reports sending enabled'), LEFT(p_detail, 300)), p_reported_by,
      NULL);
  END LOOP;
  CLOSE c_names;
  UPDATE email_tenants
     SET paused_reason = p_reason, paused_at = IF(p_reason IS NULL, NULL, v_now),
         updated_at = v_now, row_version = row_version + 1
   WHERE ses_tenant_name = p_ses_tenant_name
     AND ((p_reason IS NOT NULL AND paused_reason IS NULL)
          OR (p_reason IS NULL AND paused_reason IN ('ses-disabled', 'ses-sending-paused')));
  SET v_affected = ROW_COUNT();
  IF p_status_read IS NOT NULL THEN
    UPDATE email_tenants SET ses_sending_status = LEFT(p_status_read, 16), ses_checked_at = v_now
     WHERE ses_tenant_name = p_ses_tenant_name;
  END IF;
  COMMIT;
  SELECT v_affected AS affected;
END
