-- Claim one row by id: one guarded UPDATE by primary key. Result: affected (1 won, 0 someone else did,
-- or it is not due, or it is not claimable at all).
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
  IF p_id IS NULL OR p_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_try_claim: id must be a positive integer';
  END IF;
  IF p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_try_claim: claim_token must be 1 to 64 characters';
  END IF;
  IF p_claimed_by IS NULL OR CHAR_LENGTH(p_claimed_by) < 1 OR CHAR_LENGTH(p_claimed_by) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_try_claim: claimed_by must be 1 to 191 characters';
  END IF;
  IF p_lease_seconds IS NULL OR p_lease_seconds < 1 OR p_lease_seconds > 86400 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_try_claim: lease_seconds must be 1 to 86400';
  END IF;
  CALL email_internal_check_text('email_try_claim', 'claimed_by', p_claimed_by, 'text');

  -- Assignments read columns before they are changed, so the result is the same under MySQL's
  -- left-to-right and MariaDB's SIMULTANEOUS_ASSIGNMENT semantics.
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET claimed_from_status = status,
         status = 'Processing',
         claim_token = p_claim_token,
         claimed_by = p_claimed_by,
         claimed_at = v_now,
         lease_expires_at = v_now + INTERVAL p_lease_seconds SECOND,
         row_version = row_version + 1,
         updated_at = v_now,
         updated_by = p_claimed_by,
         transition_detail = 'claimed'
   WHERE id = p_id
     AND status IN ('Pending', 'Retrying')
     AND next_attempt_at <= v_now
     AND attempt_count < max_attempts;
  SELECT ROW_COUNT() AS affected;
END
