-- The provider call ended ambiguously (read timeout after the request left, connection reset,
-- anything unexpected): straight to UnknownOutcome, which nothing retries. Result: affected.
CREATE PROCEDURE email_finalize_unknown(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_error_message TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_actor VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_id IS NULL OR p_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_unknown: id must be a positive integer';
  END IF;
  IF p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_unknown: claim_token must be 1 to 64 characters';
  END IF;
  CALL email_internal_begin(v_own);
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET status = 'UnknownOutcome',
         attempt_count = attempt_count + 1,
         last_attempt_at = v_now,
         last_error_code = 'AmbiguousOutcome',
         last_error_message = LEFT(p_error_message, 8000),
         claim_token = NULL,
         lease_expires_at = NULL,
         claimed_from_status = NULL,
         row_version = row_version + 1,
         updated_at = v_now
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing';
  SET v_affected = ROW_COUNT();
  IF v_affected = 1 THEN
    SELECT claimed_by INTO v_actor FROM email_delivery_attempts WHERE id = p_id;
    CALL email_internal_record_event(p_id, v_now, 'Processing', 'UnknownOutcome', p_claim_token, v_actor,
      LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(p_error_message, '?')), 2000));
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected;
END
