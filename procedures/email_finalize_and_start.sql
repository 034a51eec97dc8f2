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
  -- A send accepted is nearly every call: its checks and its change are generated with the outcome
  -- 'Sent', which the generator folds to what a Sent is (and the test of the outcome to one
  -- comparison), so the server evaluates no outcome variable and no other outcome's branch. The next row's refusal follows the finalize's in
  -- the same expression, its message's rest after "next" (refuse: the errno is the first 5 characters).
  IF CAST(p_outcome AS BINARY) = 'Sent' THEN
    IF ((p_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) OR ((CHAR_LENGTH(p_provider_message_id) BETWEEN 1 AND 191) IS NOT TRUE) OR (CHAR_LENGTH(p_error_code) > 191) OR ((p_next_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_next_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) THEN
      BEGIN
        DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
          COALESCE(CASE
                     WHEN (p_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer'
                     WHEN (CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters'
                     WHEN (CHAR_LENGTH(p_provider_message_id) BETWEEN 1 AND 191) IS NOT TRUE THEN
                       '45001: provider_message_id must be 1 to 191 characters'
                     WHEN CHAR_LENGTH(p_error_code) > 191 THEN '45001: error_code must be at most 191 characters'
                   END, INSERT(CASE WHEN (p_next_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer' WHEN (CHAR_LENGTH(p_next_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters' END, 6, 0, ': next'));
        -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
        -- expression): one variable, as every variable is paid for on every call.
        CASE LEFT(v_refusal, 5)
          WHEN '45007' THEN
            SET v_refusal = CONCAT('email_finalize_and_start', SUBSTRING(v_refusal, 6));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
          WHEN '45010' THEN
            SET v_refusal = CONCAT('email_finalize_and_start', SUBSTRING(v_refusal, 6));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
          ELSE
            SET v_refusal = CONCAT('email_finalize_and_start', SUBSTRING(v_refusal, 6));
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
       SET a.status = 'Sent',
           a.last_attempt_at = v_now,
           a.provider_message_id = p_provider_message_id,
           a.sent_at = v_now,
           a.attempt_count = a.attempt_count + 1,
           a.claim_token = NULL,
           a.lease_expires_at = NULL,
           a.claimed_from_status = NULL,
           a.reserved_at = NULL,
           a.row_version = a.row_version + 1,
           a.updated_at = v_now
     WHERE a.id = p_id
       AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
       AND a.status = 'Processing';
    IF ROW_COUNT() = 1 THEN
      -- The audit event from the row just written (its status, its claimant), in one statement.
      INSERT INTO email_delivery_events
        (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
      SELECT a.id, v_now, 'Processing', a.status, p_claim_token, a.claimed_by, SESSION_USER(),
             CONCAT('provider_message_id=', p_provider_message_id)
        FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
       WHERE a.id = p_id;
      -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
      -- from) write a status that depends on the row.
      SET v_to = 'Sent';
    ELSE
      SET v_to = NULL;
    END IF;
  ELSE
    BEGIN
      -- Declared here, where it is used: a variable costs every call that declares it.
      DECLARE v_outcome VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT CASE CAST(p_outcome AS BINARY)
                                                                    WHEN 'Sent' THEN 'Sent'
                                                                    WHEN 'Failed' THEN 'Failed'
                                                                    WHEN 'Retrying' THEN 'Retrying'
                                                                    WHEN 'UnknownOutcome' THEN 'UnknownOutcome'
                                                                    WHEN 'Released' THEN 'Released'
                                                                    WHEN 'Started' THEN 'Started'
                                                                  END;
      IF ((p_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) OR (v_outcome IS NULL OR v_outcome NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released')) OR (v_outcome = 'Sent' AND (CHAR_LENGTH(p_provider_message_id) BETWEEN 1 AND 191) IS NOT TRUE) OR (CHAR_LENGTH(p_error_code) > 191) OR (v_outcome IN ('Retrying', 'Failed', 'Released') AND (COALESCE(p_delay_seconds, 0) IS NULL OR COALESCE(p_delay_seconds, 0) < 0 OR COALESCE(p_delay_seconds, 0) > 604800)) OR ((p_next_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_next_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) THEN
        BEGIN
          DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
            COALESCE(CASE
                       WHEN (p_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer'
                       WHEN (CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters'
                       WHEN v_outcome IS NULL OR v_outcome NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released') THEN
                         '45001: outcome must be Sent, Failed, Retrying, UnknownOutcome or Released'
                       WHEN v_outcome = 'Sent' AND (CHAR_LENGTH(p_provider_message_id) BETWEEN 1 AND 191) IS NOT TRUE THEN
                         '45001: provider_message_id must be 1 to 191 characters'
                       WHEN CHAR_LENGTH(p_error_code) > 191 THEN '45001: error_code must be at most 191 characters'
                       WHEN v_outcome IN ('Retrying', 'Failed', 'Released') AND (COALESCE(p_delay_seconds, 0) IS NULL OR COALESCE(p_delay_seconds, 0) < 0 OR COALESCE(p_delay_seconds, 0) > 604800) THEN
                         CONCAT('45001: ', 'delay_seconds', ' must be 0 to 604800')
                     END, INSERT(CASE WHEN (p_next_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer' WHEN (CHAR_LENGTH(p_next_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters' END, 6, 0, ': next'));
          -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
          -- expression): one variable, as every variable is paid for on every call.
          CASE LEFT(v_refusal, 5)
            WHEN '45007' THEN
              SET v_refusal = CONCAT('email_finalize_and_start', SUBSTRING(v_refusal, 6));
              SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
            WHEN '45010' THEN
              SET v_refusal = CONCAT('email_finalize_and_start', SUBSTRING(v_refusal, 6));
              SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
            ELSE
              SET v_refusal = CONCAT('email_finalize_and_start', SUBSTRING(v_refusal, 6));
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
         SET a.status = CASE v_outcome
                          WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                          WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                          ELSE v_outcome
                        END,
             a.next_attempt_at = IF(v_outcome = 'Released' OR (v_outcome = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                                    v_now + INTERVAL COALESCE(p_delay_seconds, 0) SECOND, a.next_attempt_at),
             a.last_attempt_at = IF(v_outcome <> 'Released', v_now, a.last_attempt_at),
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
         AND a.status = 'Processing';
      IF ROW_COUNT() = 1 THEN
        -- The audit event from the row just written (its status, its claimant), in one statement.
        INSERT INTO email_delivery_events
          (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
        SELECT a.id, v_now, 'Processing', a.status, p_claim_token, a.claimed_by, SESSION_USER(),
               CASE
                 WHEN v_outcome = 'Sent' THEN CONCAT('provider_message_id=', p_provider_message_id)
                 WHEN v_outcome = 'UnknownOutcome' THEN
                   LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(p_error_message, '?')), 2000)
                 WHEN v_outcome = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
                 WHEN v_outcome = 'Retrying' AND a.status = 'Failed' THEN
                   CONCAT('attempts used up: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
                 WHEN v_outcome = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), '?'))
                 ELSE CONCAT('released, due again in ', COALESCE(p_delay_seconds, 0), 's')
               END
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
    END;
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
    BEGIN
      -- No such row is an answer (nothing changed), not a condition for the caller.
      DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
      SET v_started = NULL;
      -- First a plain read, which locks nothing: a row that is being sent, or finished, is left without a
      -- lock, so a caller whose transaction stays open after a call that changed nothing holds up no
      -- worker's finalize (issue 37). Only a row that may change is locked and read again. (A caller
      -- whose snapshot is older than the row's start still locks it; the worker waits on such a lock for
      -- its short lock wait timeout only.)
      SELECT status INTO v_started
        FROM email_delivery_attempts FORCE INDEX (PRIMARY)
       WHERE id = p_next_id
         AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL));
      IF v_started IS NOT NULL THEN
        SET v_started = NULL;
        SELECT status INTO v_started
          FROM email_delivery_attempts FORCE INDEX (PRIMARY)
         WHERE id = p_next_id
           AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL))
           AND (expires_at <= v_now)
           FOR UPDATE;
        IF v_started IS NOT NULL THEN
          -- The row is ours until commit: its event reads the claim token and the expiry first, then the
          -- change clears the claim.
          INSERT INTO email_delivery_events
            (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
          SELECT id, v_now, status, 'Failed', claim_token, 'start-check', SESSION_USER(), CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC')
            FROM email_delivery_attempts FORCE INDEX (PRIMARY)
           WHERE id = p_next_id;
          UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
             SET status = 'Failed',
                 last_error_code = 'Expired',
                 last_error_message = LEFT(CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC'), 8000),
                 claim_token = NULL,
                 lease_expires_at = NULL,
                 claimed_from_status = NULL,
                 reserved_at = NULL,
                 row_version = row_version + 1,
                 updated_at = v_now
           WHERE id = p_next_id;
        END IF;
      END IF;
    END;
    SET v_started = NULL;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  SELECT v_to IS NOT NULL AS affected, v_to AS status, v_started IS NOT NULL AS started;
END
