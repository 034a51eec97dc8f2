-- Claim one row by id: one guarded UPDATE by primary key. Checks suppression as the batch claim does:
-- a row whose to_address is on the suppression list ends Failed ('Suppressed') instead of being
-- claimed; a cc, bcc or other to address suppressed since the enqueue is left out of message_options.
-- Result: one row, affected (1 won, 0 someone else did, or it is not due, or it is not claimable at
-- all), then the claim row shape of email_claim_batch (id, notification_id, to_address, from_address,
-- subject, text_body, html_body, attempt_count, max_attempts, lease_expires_at, body_bytes,
-- message_options, attachment_bytes, tenant, ses_tenant_name, created_at) as claimed, bodies inline;
-- all NULL when affected is 0.
CREATE PROCEDURE email_try_claim(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_suppressed INT DEFAULT 0;
  DECLARE v_expired_from VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_check_claim('email_try_claim', p_id, p_claim_token);
  IF p_claimed_by IS NULL OR CHAR_LENGTH(p_claimed_by) < 1 OR CHAR_LENGTH(p_claimed_by) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = 'email_try_claim: claimed_by must be 1 to 191 characters';
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = 'email_try_claim: lease_seconds must be 1 to 86400';
  END IF;
  CALL email_internal_check_text('email_try_claim', 'claimed_by', p_claimed_by, 'text');

  -- Assignments read columns before they are changed, so the result is the same under MySQL's
  -- left-to-right and MariaDB's SIMULTANEOUS_ASSIGNMENT semantics.
  CALL email_internal_begin(v_own);
  -- A row to a suppressed address ends Failed instead of being claimed (the claim then matches 0).
  CALL email_internal_fail_if_suppressed(p_id, v_now, p_claimed_by, v_suppressed);
  -- A row past its expires_at ends Failed ('Expired') instead of being claimed (the claim then matches 0).
  CALL email_internal_end_unsent(p_id, v_now, 'Expired', NULL, p_claimed_by, 1, v_expired_from);
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET claimed_from_status = status,
         status = 'Processing',
         claim_token = p_claim_token,
         claimed_by = p_claimed_by,
         claimed_at = v_now,
         lease_expires_at = v_now + INTERVAL p_lease_seconds SECOND,
         row_version = row_version + 1,
         updated_at = v_now
   WHERE id = p_id
     AND claim_due_at <= v_now
     AND attempt_count < max_attempts;
  SET v_affected = ROW_COUNT();
  IF v_affected = 1 THEN
    SELECT claimed_from_status INTO v_from FROM email_delivery_attempts WHERE id = p_id;
    CALL email_internal_record_event(p_id, v_now, v_from, 'Processing', p_claim_token, p_claimed_by, 'claimed');
    CALL email_internal_drop_suppressed_row(p_id);
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected, a.id, a.notification_id, a.to_address, a.from_address, a.subject,
         a.text_body, a.html_body, a.attempt_count, a.max_attempts, a.lease_expires_at,
         IF(a.id IS NULL, NULL, COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0)) AS body_bytes,
         a.message_options, a.attachment_bytes, t.name AS tenant, t.ses_tenant_name, a.created_at
    FROM (SELECT 1 AS one) x
         LEFT JOIN email_delivery_attempts a FORCE INDEX (PRIMARY)
           ON v_affected = 1 AND a.id = p_id AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
         LEFT JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id;
END
