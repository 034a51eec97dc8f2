-- Give a claimed row back unsent (throttled, paused, provider disabled, shutting down): back to the
-- status it was claimed from, attempt not counted, due again after delay_seconds. Result: affected.
CREATE PROCEDURE email_release_claim(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_delay_seconds BIGINT
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
  BEGIN
    DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CASE
        WHEN p_id IS NULL OR p_id < 1 THEN '45001: id must be a positive integer'
        WHEN p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN '45007: claim_token must be 1 to 64 characters'
        WHEN 'Released' IS NULL OR 'Released' NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released') THEN
          '45001: outcome must be Sent, Failed, Retrying, UnknownOutcome or Released'
        WHEN 'Released' = 'Sent' AND (NULL IS NULL OR CHAR_LENGTH(NULL) < 1
                                       OR CHAR_LENGTH(NULL) > 191) THEN
          '45001: provider_message_id must be 1 to 191 characters'
        WHEN CHAR_LENGTH(NULL) > 191 THEN '45001: error_code must be at most 191 characters'
        WHEN 'Released' IN ('Retrying', 'Failed', 'Released') AND (p_delay_seconds IS NULL OR p_delay_seconds < 0 OR p_delay_seconds > 604800) THEN
          CONCAT('45001: ', 'delay_seconds', ' must be 0 to 604800')
      END;
    IF v_refusal IS NOT NULL THEN
      BEGIN
        DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CONCAT('email_release_claim', SUBSTRING(v_refusal, 6));
        IF LEFT(v_refusal, 5) = '45007' THEN
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_message;
        ELSEIF LEFT(v_refusal, 5) = '45010' THEN
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_message;
        END IF;
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END;
    END IF;
  END;
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
     SET a.status = CASE 'Released'
                      WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                      WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                      ELSE 'Released'
                    END,
         a.next_attempt_at = IF('Released' = 'Released' OR ('Released' = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                                v_now + INTERVAL COALESCE(p_delay_seconds, 0) SECOND, a.next_attempt_at),
         a.last_attempt_at = IF('Released' <> 'Released', IF(NULL IS NULL, v_now, a.claimed_at), a.last_attempt_at),
         a.last_error_code = IF('Released' IN ('Failed', 'Retrying', 'UnknownOutcome'), IF('Released' = 'UnknownOutcome', 'AmbiguousOutcome', NULL), a.last_error_code),
         a.provider_message_id = IF('Released' = 'Sent', NULL, a.provider_message_id),
         a.sent_at = IF('Released' = 'Sent', v_now, a.sent_at),
         a.attempt_count = a.attempt_count + IF('Released' <> 'Released', 1, 0),
         a.claim_token = NULL,
         a.lease_expires_at = NULL,
         a.claimed_from_status = NULL,
         a.reserved_at = NULL,
         a.row_version = a.row_version + 1,
         a.updated_at = v_now,
         a.last_error_message = IF('Released' IN ('Failed', 'Retrying', 'UnknownOutcome'), LEFT(NULL, 8000), a.last_error_message)
   WHERE a.id = p_id
     AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
     AND (NULL IS NULL OR a.lease_expires_at <= NULL)
     AND (NULL IS NULL OR 'Released' <> 'Released' OR a.reserved_at IS NOT NULL);
  IF ROW_COUNT() = 1 THEN
    -- The audit event from the row just written (its status, its claimant), in one statement.
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT a.id, v_now, 'Processing', a.status, p_claim_token, COALESCE(NULL, a.claimed_by), SESSION_USER(),
           COALESCE(NULL, CASE
             WHEN 'Released' = 'Sent' THEN CONCAT('provider_message_id=', NULL)
             WHEN 'Released' = 'UnknownOutcome' THEN
               LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(NULL, '?')), 2000)
             WHEN 'Released' = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(IF('Released' = 'UnknownOutcome', 'AmbiguousOutcome', NULL), '?'))
             WHEN 'Released' = 'Retrying' AND a.status = 'Failed' THEN
               CONCAT('attempts used up: ', COALESCE(IF('Released' = 'UnknownOutcome', 'AmbiguousOutcome', NULL), '?'))
             WHEN 'Released' = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(IF('Released' = 'UnknownOutcome', 'AmbiguousOutcome', NULL), '?'))
             ELSE CONCAT('released, due again in ', COALESCE(p_delay_seconds, 0), 's')
           END)
      FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
     WHERE a.id = p_id;
    -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
    -- from) write a status that depends on the row.
    IF 'Released' IN ('Sent', 'Failed', 'UnknownOutcome') THEN
      SET v_to = CASE 'Released' WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' ELSE 'UnknownOutcome' END;
    ELSE
      SELECT a.status INTO v_to FROM email_delivery_attempts a FORCE INDEX (PRIMARY) WHERE a.id = p_id;
    END IF;
  ELSE
    SET v_to = NULL;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
