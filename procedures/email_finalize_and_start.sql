-- The finalize of the row a worker has just sent and the start mark of the reservation it sends next,
-- in one call and one transaction: what a worker does after each send while sends are slow, without
-- email_finalize_batch's JSON: the same as that procedure given two items, the first p_outcome with
-- its members ('Sent', 'Failed', 'Retrying', 'UnknownOutcome' or 'Released', under the same rules; a
-- member the outcome does not take is ignored), the second 'Started' for p_next_id. Each is fenced by its own
-- claim: one no longer held is left as it is and the other still lands. A malformed argument refuses
-- the call, naming it (the next row's as "email_finalize_and_start: next: ..."), and nothing is written.
-- Result: one row: affected, status (the finalize: as email_finalize_failure's), started (1: the next
-- row may be sent now; 0: do not send it). Inside the caller's transaction, if one is open.
CREATE PROCEDURE email_finalize_and_start(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_outcome TEXT CHARACTER SET utf8mb4,
  IN p_provider_message_id TEXT CHARACTER SET utf8mb4,
  IN p_error_code TEXT CHARACTER SET utf8mb4,
  IN p_error_message TEXT CHARACTER SET utf8mb4,
  IN p_delay_seconds BIGINT,
  IN p_next_id BIGINT,
  IN p_next_claim_token TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_outcome VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_started VARCHAR(20) CHARACTER SET utf8mb4;
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
  SET v_outcome = CASE CAST(p_outcome AS BINARY)
                    WHEN 'Sent' THEN 'Sent'
                    WHEN 'Failed' THEN 'Failed'
                    WHEN 'Retrying' THEN 'Retrying'
                    WHEN 'UnknownOutcome' THEN 'UnknownOutcome'
                    WHEN 'Released' THEN 'Released'
                    WHEN 'Started' THEN 'Started'
                  END;
  BEGIN
    DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CASE
        WHEN p_id IS NULL OR p_id < 1 THEN '45001: id must be a positive integer'
        WHEN p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN '45007: claim_token must be 1 to 64 characters'
        WHEN v_outcome IS NULL OR v_outcome NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released') THEN
          '45001: outcome must be Sent, Failed, Retrying, UnknownOutcome or Released'
        WHEN v_outcome = 'Sent' AND (p_provider_message_id IS NULL OR CHAR_LENGTH(p_provider_message_id) < 1
                                       OR CHAR_LENGTH(p_provider_message_id) > 191) THEN
          '45001: provider_message_id must be 1 to 191 characters'
        WHEN CHAR_LENGTH(p_error_code) > 191 THEN '45001: error_code must be at most 191 characters'
        WHEN v_outcome IN ('Retrying', 'Failed', 'Released') AND (COALESCE(p_delay_seconds, 0) IS NULL OR COALESCE(p_delay_seconds, 0) < 0 OR COALESCE(p_delay_seconds, 0) > 604800) THEN
          CONCAT('45001: ', 'delay_seconds', ' must be 0 to 604800')
      END;
    IF v_refusal IS NOT NULL THEN
      BEGIN
        DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CONCAT('email_finalize_and_start', SUBSTRING(v_refusal, 6));
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
    DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CASE WHEN p_next_id IS NULL OR p_next_id < 1 THEN '45001: id must be a positive integer' WHEN p_next_claim_token IS NULL OR CHAR_LENGTH(p_next_claim_token) < 1 OR CHAR_LENGTH(p_next_claim_token) > 64 THEN '45007: claim_token must be 1 to 64 characters' END;
    IF v_refusal IS NOT NULL THEN
      BEGIN
        DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CONCAT('email_finalize_and_start: next', SUBSTRING(v_refusal, 6));
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
  -- A send accepted is nearly every call: its change is spelled for Sent alone, so the statements name
  -- no outcome variable the server would rewrite and re-evaluate on every execution.
  IF v_outcome = 'Sent' THEN
    UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
       SET a.status = CASE 'Sent'
                        WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                        WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                        ELSE 'Sent'
                      END,
           a.next_attempt_at = IF('Sent' = 'Released' OR ('Sent' = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                                  v_now + INTERVAL COALESCE(0, 0) SECOND, a.next_attempt_at),
           a.last_attempt_at = IF('Sent' <> 'Released', IF(NULL IS NULL, v_now, a.claimed_at), a.last_attempt_at),
           a.last_error_code = IF('Sent' IN ('Failed', 'Retrying', 'UnknownOutcome'), IF('Sent' = 'UnknownOutcome', 'AmbiguousOutcome', NULL), a.last_error_code),
           a.provider_message_id = IF('Sent' = 'Sent', p_provider_message_id, a.provider_message_id),
           a.sent_at = IF('Sent' = 'Sent', v_now, a.sent_at),
           a.attempt_count = a.attempt_count + IF('Sent' <> 'Released', 1, 0),
           a.claim_token = NULL,
           a.lease_expires_at = NULL,
           a.claimed_from_status = NULL,
           a.reserved_at = NULL,
           a.row_version = a.row_version + 1,
           a.updated_at = v_now,
           a.last_error_message = IF('Sent' IN ('Failed', 'Retrying', 'UnknownOutcome'), LEFT(NULL, 8000), a.last_error_message)
     WHERE a.id = p_id
       AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
       AND a.status = 'Processing'
       AND (NULL IS NULL OR a.lease_expires_at <= NULL)
       AND (NULL IS NULL OR 'Sent' <> 'Released' OR a.reserved_at IS NOT NULL);
    IF ROW_COUNT() = 1 THEN
      -- The audit event from the row just written (its status, its claimant), in one statement.
      INSERT INTO email_delivery_events
        (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
      SELECT a.id, v_now, 'Processing', a.status, p_claim_token, COALESCE(NULL, a.claimed_by), SESSION_USER(),
             COALESCE(NULL, CASE
               WHEN 'Sent' = 'Sent' THEN CONCAT('provider_message_id=', p_provider_message_id)
               WHEN 'Sent' = 'UnknownOutcome' THEN
                 LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(NULL, '?')), 2000)
               WHEN 'Sent' = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(IF('Sent' = 'UnknownOutcome', 'AmbiguousOutcome', NULL), '?'))
               WHEN 'Sent' = 'Retrying' AND a.status = 'Failed' THEN
                 CONCAT('attempts used up: ', COALESCE(IF('Sent' = 'UnknownOutcome', 'AmbiguousOutcome', NULL), '?'))
               WHEN 'Sent' = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(IF('Sent' = 'UnknownOutcome', 'AmbiguousOutcome', NULL), '?'))
               ELSE CONCAT('released, due again in ', COALESCE(0, 0), 's')
             END)
        FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
       WHERE a.id = p_id;
      -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
      -- from) write a status that depends on the row.
      IF 'Sent' IN ('Sent', 'Failed', 'UnknownOutcome') THEN
        SET v_to = CASE 'Sent' WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' ELSE 'UnknownOutcome' END;
      ELSE
        SELECT a.status INTO v_to FROM email_delivery_attempts a FORCE INDEX (PRIMARY) WHERE a.id = p_id;
      END IF;
    ELSE
      SET v_to = NULL;
    END IF;
  ELSE
    UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
       SET a.status = CASE v_outcome
                        WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                        WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                        ELSE v_outcome
                      END,
           a.next_attempt_at = IF(v_outcome = 'Released' OR (v_outcome = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                                  v_now + INTERVAL COALESCE(p_delay_seconds, 0) SECOND, a.next_attempt_at),
           a.last_attempt_at = IF(v_outcome <> 'Released', IF(NULL IS NULL, v_now, a.claimed_at), a.last_attempt_at),
           a.last_error_code = IF(v_outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), a.last_error_code),
           a.provider_message_id = IF(v_outcome = 'Sent', p_provider_message_id, a.provider_message_id),
           a.sent_at = IF(v_outcome = 'Sent', v_now, a.sent_at),
           a.attempt_count = a.attempt_count + IF(v_outcome <> 'Released', 1, 0),
           a.claim_token = NULL,
           a.lease_expires_at = NULL,
           a.claimed_from_status = NULL,
           a.reserved_at = NULL,
           a.row_version = a.row_version + 1,
           a.updated_at = v_now,
           a.last_error_message = IF(v_outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), LEFT(p_error_message, 8000), a.last_error_message)
     WHERE a.id = p_id
       AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
       AND a.status = 'Processing'
       AND (NULL IS NULL OR a.lease_expires_at <= NULL)
       AND (NULL IS NULL OR v_outcome <> 'Released' OR a.reserved_at IS NOT NULL);
    IF ROW_COUNT() = 1 THEN
      -- The audit event from the row just written (its status, its claimant), in one statement.
      INSERT INTO email_delivery_events
        (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
      SELECT a.id, v_now, 'Processing', a.status, p_claim_token, COALESCE(NULL, a.claimed_by), SESSION_USER(),
             COALESCE(NULL, CASE
               WHEN v_outcome = 'Sent' THEN CONCAT('provider_message_id=', p_provider_message_id)
               WHEN v_outcome = 'UnknownOutcome' THEN
                 LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(p_error_message, '?')), 2000)
               WHEN v_outcome = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
               WHEN v_outcome = 'Retrying' AND a.status = 'Failed' THEN
                 CONCAT('attempts used up: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
               WHEN v_outcome = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
               ELSE CONCAT('released, due again in ', COALESCE(p_delay_seconds, 0), 's')
             END)
        FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
       WHERE a.id = p_id;
      -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
      -- from) write a status that depends on the row.
      IF v_outcome IN ('Sent', 'Failed', 'UnknownOutcome') THEN
        SET v_to = CASE v_outcome WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' ELSE 'UnknownOutcome' END;
      ELSE
        SELECT a.status INTO v_to FROM email_delivery_attempts a FORCE INDEX (PRIMARY) WHERE a.id = p_id;
      END IF;
    ELSE
      SET v_to = NULL;
    END IF;
  END IF;
  UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
     SET a.reserved_at = NULL
   WHERE a.id = p_next_id
     AND a.claim_token = p_next_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
     AND a.reserved_at IS NOT NULL
     AND a.lease_expires_at > v_now
     AND (a.expires_at IS NULL OR a.expires_at > v_now);
  IF ROW_COUNT() = 1 THEN
    SET v_started = 'Processing';
  ELSE
    SET v_started = NULL;
    BEGIN
      DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4;
      CALL email_internal_end_unsent(p_next_id, v_now, 'Expired', NULL, 'start-check', 1, v_from);
    END;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  SELECT IF(v_to IS NULL, 0, 1) AS affected, v_to AS status, IF(v_started IS NULL, 0, 1) AS started;
END
