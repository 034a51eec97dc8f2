-- The provider call failed. Permanent, or the attempt that used up max_attempts: Failed. Otherwise
-- Retrying, due again after retry_delay_seconds (the worker's backoff). Fenced by id and claim token.
-- Two guarded UPDATEs, each decided by its own row count, so the status reported and audited is the
-- one this call wrote. Result: affected, status (NULL when affected is 0).
CREATE PROCEDURE email_finalize_failure(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_permanent TINYINT,
  IN p_error_code TEXT CHARACTER SET utf8mb4,
  IN p_error_message TEXT CHARACTER SET utf8mb4,
  IN p_retry_delay_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_detail TEXT CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_actor VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_id IS NULL OR p_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_failure: id must be a positive integer';
  END IF;
  IF p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_failure: claim_token must be 1 to 64 characters';
  END IF;
  IF p_permanent IS NULL OR p_permanent NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_failure: permanent must be 0 or 1';
  END IF;
  IF CHAR_LENGTH(p_error_code) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_failure: error_code must be at most 191 characters';
  END IF;
  IF p_retry_delay_seconds IS NULL OR p_retry_delay_seconds < 0 OR p_retry_delay_seconds > 604800 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_finalize_failure: retry_delay_seconds must be 0 to 604800';
  END IF;

  CALL email_internal_begin(v_own);
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET status = 'Failed',
         attempt_count = attempt_count + 1,
         last_attempt_at = v_now,
         last_error_code = p_error_code,
         last_error_message = LEFT(p_error_message, 8000),
         claim_token = NULL,
         lease_expires_at = NULL,
         claimed_from_status = NULL,
         row_version = row_version + 1,
         updated_at = v_now
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing'
     AND (p_permanent = 1 OR attempt_count + 1 >= max_attempts);
  IF ROW_COUNT() = 1 THEN
    SET v_to = 'Failed',
        v_detail = CONCAT(IF(p_permanent = 1, 'permanent failure: ', 'attempts used up: '), COALESCE(p_error_code, '?'));
  ELSE
    UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
       SET status = 'Retrying',
           attempt_count = attempt_count + 1,
           last_attempt_at = v_now,
           next_attempt_at = v_now + INTERVAL p_retry_delay_seconds SECOND,
           last_error_code = p_error_code,
           last_error_message = LEFT(p_error_message, 8000),
           claim_token = NULL,
           lease_expires_at = NULL,
           claimed_from_status = NULL,
           row_version = row_version + 1,
           updated_at = v_now
     WHERE id = p_id
       AND claim_token = p_claim_token COLLATE utf8mb4_bin
       AND status = 'Processing'
       AND p_permanent = 0
       AND attempt_count + 1 < max_attempts;
    IF ROW_COUNT() = 1 THEN
      SET v_to = 'Retrying', v_detail = CONCAT('transient failure: ', COALESCE(p_error_code, '?'));
    END IF;
  END IF;
  IF v_to IS NOT NULL THEN
    SET v_affected = 1;
    SELECT claimed_by INTO v_actor FROM email_delivery_attempts WHERE id = p_id;
    CALL email_internal_record_event(p_id, v_now, 'Processing', v_to, p_claim_token, v_actor, v_detail);
  END IF;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected, v_to AS status;
END
