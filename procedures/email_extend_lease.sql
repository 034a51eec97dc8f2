-- Extend the holder's lease from now. Fenced by id, claim token and Processing; a lease that has
-- already passed cannot be revived. Result: affected.
CREATE PROCEDURE email_extend_lease(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  CALL email_internal_check_claim('email_extend_lease', p_id, p_claim_token);
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = 'email_extend_lease: lease_seconds must be 1 to 86400';
  END IF;
  -- row_version changes even when a frozen clock leaves lease_expires_at as it was.
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET lease_expires_at = v_now + INTERVAL p_lease_seconds SECOND,
         row_version = row_version + 1,
         updated_at = v_now
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing'
     AND lease_expires_at > v_now;
  SELECT ROW_COUNT() AS affected;
END
