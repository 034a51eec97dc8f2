-- The provider call failed. Permanent, or the attempt that used up max_attempts: Failed. Otherwise
-- Retrying, due again after retry_delay_seconds (the worker's backoff). Fenced by id and claim token.
-- Result: affected, status (the status written; NULL when affected is 0).
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
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
      IF v_own = 1 THEN
        ROLLBACK;
      ELSEIF v_own = 0 THEN
        ROLLBACK TO SAVEPOINT email_outbox_call;
      END IF;
    END;
    RESIGNAL;
  END;
  IF ((p_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) OR (p_permanent IS NULL OR p_permanent NOT IN (0, 1)) OR (IF(p_permanent = 1, 'Failed', 'Retrying') IS NULL OR IF(p_permanent = 1, 'Failed', 'Retrying') NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released')) OR (IF(p_permanent = 1, 'Failed', 'Retrying') = 'Sent' AND (NULL BETWEEN 1 AND 191) IS NOT TRUE) OR (CHAR_LENGTH(p_error_code) > 191) OR (IF(p_permanent = 1, 'Failed', 'Retrying') IN ('Retrying', 'Failed', 'Released') AND (p_retry_delay_seconds IS NULL OR p_retry_delay_seconds < 0 OR p_retry_delay_seconds > 604800)) THEN
    BEGIN
      DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
        CASE
          WHEN (p_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer'
          WHEN (CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters'
          WHEN p_permanent IS NULL OR p_permanent NOT IN (0, 1) THEN '45001: permanent must be 0 or 1'
          WHEN IF(p_permanent = 1, 'Failed', 'Retrying') IS NULL OR IF(p_permanent = 1, 'Failed', 'Retrying') NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released') THEN
            '45001: outcome must be Sent, Failed, Retrying, UnknownOutcome or Released'
          WHEN IF(p_permanent = 1, 'Failed', 'Retrying') = 'Sent' AND (NULL BETWEEN 1 AND 191) IS NOT TRUE THEN
            '45001: provider_message_id must be 1 to 191 characters'
          WHEN CHAR_LENGTH(p_error_code) > 191 THEN '45001: error_code must be at most 191 characters'
          WHEN IF(p_permanent = 1, 'Failed', 'Retrying') IN ('Retrying', 'Failed', 'Released') AND (p_retry_delay_seconds IS NULL OR p_retry_delay_seconds < 0 OR p_retry_delay_seconds > 604800) THEN
            CONCAT('45001: ', 'retry_delay_seconds', ' must be 0 to 604800')
        END;
      -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
      -- expression): one variable, as every variable is paid for on every call.
      CASE LEFT(v_refusal, 5)
        WHEN '45007' THEN
          SET v_refusal = CONCAT('email_finalize_failure', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
        WHEN '45010' THEN
          SET v_refusal = CONCAT('email_finalize_failure', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
        ELSE
          SET v_refusal = CONCAT('email_finalize_failure', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_refusal;
      END CASE;
    END;
  END IF;
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1568 SET v_own = 0;
    SET v_own = 1;
    SET TRANSACTION READ WRITE;
  END;
  IF v_own = 1 THEN
    START TRANSACTION;
  ELSE
    SAVEPOINT email_outbox_call;
  END IF;
  UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
     SET a.status = CASE IF(p_permanent = 1, 'Failed', 'Retrying')
                      WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                      WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                      ELSE IF(p_permanent = 1, 'Failed', 'Retrying')
                    END,
         a.next_attempt_at = IF(IF(p_permanent = 1, 'Failed', 'Retrying') = 'Released' OR (IF(p_permanent = 1, 'Failed', 'Retrying') = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                                v_now + INTERVAL COALESCE(p_retry_delay_seconds, 0) SECOND, a.next_attempt_at),
         a.last_attempt_at = IF(IF(p_permanent = 1, 'Failed', 'Retrying') <> 'Released', v_now, a.last_attempt_at),
         a.last_error_code = IF(IF(p_permanent = 1, 'Failed', 'Retrying') IN ('Failed', 'Retrying', 'UnknownOutcome'), IF(IF(p_permanent = 1, 'Failed', 'Retrying') = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), a.last_error_code),
         a.provider_message_id = IF(IF(p_permanent = 1, 'Failed', 'Retrying') = 'Sent', NULL, a.provider_message_id),
         a.sent_at = IF(IF(p_permanent = 1, 'Failed', 'Retrying') = 'Sent', v_now, a.sent_at),
         a.attempt_count = a.attempt_count + IF(IF(p_permanent = 1, 'Failed', 'Retrying') <> 'Released', 1, 0),
         a.claim_token = NULL,
         a.lease_expires_at = NULL,
         a.claimed_from_status = NULL,
         a.reserved_at = NULL,
         a.row_version = a.row_version + 1,
         a.updated_at = v_now,
         a.last_error_message = IF(IF(p_permanent = 1, 'Failed', 'Retrying') IN ('Failed', 'Retrying', 'UnknownOutcome'), LEFT(p_error_message, 8000), a.last_error_message)
   WHERE a.id = p_id
     AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing';
  IF ROW_COUNT() = 1 THEN
    -- The audit event from the row just written (its status, its claimant), in one statement.
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT a.id, v_now, 'Processing', a.status, p_claim_token, a.claimed_by, SESSION_USER(),
           CASE
             WHEN IF(p_permanent = 1, 'Failed', 'Retrying') = 'Sent' THEN NULL
             WHEN IF(p_permanent = 1, 'Failed', 'Retrying') = 'UnknownOutcome' THEN
               LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(p_error_message, '?')), 2000)
             WHEN IF(p_permanent = 1, 'Failed', 'Retrying') = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(IF(IF(p_permanent = 1, 'Failed', 'Retrying') = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
             WHEN IF(p_permanent = 1, 'Failed', 'Retrying') = 'Retrying' AND a.status = 'Failed' THEN
               CONCAT('attempts used up: ', COALESCE(IF(IF(p_permanent = 1, 'Failed', 'Retrying') = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
             WHEN IF(p_permanent = 1, 'Failed', 'Retrying') = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(IF(IF(p_permanent = 1, 'Failed', 'Retrying') = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
             ELSE CONCAT('released, due again in ', COALESCE(p_retry_delay_seconds, 0), 's')
           END
      FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
     WHERE a.id = p_id;
    -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
    -- from) write a status that depends on the row.
    IF IF(p_permanent = 1, 'Failed', 'Retrying') IN ('Sent', 'Failed', 'UnknownOutcome') THEN
      SET v_to = CASE IF(p_permanent = 1, 'Failed', 'Retrying') WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' ELSE 'UnknownOutcome' END;
    ELSE
      SELECT a.status INTO v_to FROM email_delivery_attempts a FORCE INDEX (PRIMARY) WHERE a.id = p_id;
    END IF;
  ELSE
    SET v_to = NULL;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  SELECT IF(v_to IS NULL, 0, 1) AS affected, v_to AS status;
END
