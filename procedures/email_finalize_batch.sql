-- Several finalizes in one call and one transaction: what a worker does when several of its sends end
-- together. p_outcomes is a JSON array of 1 to 1000 objects, each with exactly these members:
--   id, claim_token                  the claim, as for the single finalizes (required)
--   outcome                          the status to write, 'Sent', 'Failed', 'Retrying', 'UnknownOutcome'
--                                    or 'Released', or 'Started' (required, spelled exactly so)
--   provider_message_id              required for 'Sent', absent or null otherwise
--   error_code, error_message        for 'Failed' and 'Retrying' ('UnknownOutcome': error_message); optional
--   delay_seconds                    for 'Retrying' and 'Released' (0 to 604800); optional, 0
-- Each one is the single procedure's change, under the same rules and with the same fence: 'Sent' is
-- email_finalize_sent, 'Failed' and 'Retrying' email_finalize_failure with permanent 1 and 0,
-- 'UnknownOutcome' email_finalize_unknown, 'Released' email_release_claim, 'Started' email_start_send (a
-- worker sends the start of its next reservation with its last finalize). A row the caller no longer holds is left
-- as it is (affected 0) and the others still land. A malformed item refuses the whole call, naming its
-- index (45002 for the array's or an item's shape; a value, the single procedure's number), and
-- nothing is written.
-- Result: one row per item, in the order given: seq (from 0), id, affected, status (the status
-- written; NULL when affected is 0). Inside the caller's transaction, if one is open.
CREATE PROCEDURE email_finalize_batch(
  IN p_outcomes LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_unique INT;
  DECLARE v_errors INT;
  DECLARE v_seq INT;
  DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4;
  DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4;
  DECLARE v_id BIGINT;
  DECLARE v_token VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_outcome VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_provider_message_id VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE v_error_code VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE v_error_message TEXT CHARACTER SET utf8mb4;
  DECLARE v_delay BIGINT;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_done INT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE c_items CURSOR FOR
    SELECT seq, id, claim_token, outcome, provider_message_id, error_code, error_message, delay_seconds
      FROM email_finalize_items ORDER BY seq;
  DECLARE c_unstarted CURSOR FOR
    SELECT id FROM email_finalize_items WHERE outcome = 'Started' AND landed = 0 ORDER BY seq;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
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
  IF p_outcomes IS NULL OR NOT JSON_VALID(p_outcomes) OR JSON_TYPE(p_outcomes) <> 'ARRAY'
     OR JSON_LENGTH(p_outcomes) < 1 OR JSON_LENGTH(p_outcomes) > 1000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_finalize_batch: outcomes must be a JSON array of 1 to 1000 objects';
  END IF;
  -- The session's working table of the items (a session's copy is its own), made by the session's
  -- first call and emptied by each: a statement to make it on every call would cost as much as one
  -- that changes rows. The server's default engine for temporary tables (InnoDB): MEMORY stores
  -- every VARCHAR at its full width, and copying rows of 40 KB cost more than the rows' own change.
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1146
      CREATE TEMPORARY TABLE email_finalize_items (
        seq INT NOT NULL PRIMARY KEY,
        id BIGINT NOT NULL,
        claim_token VARCHAR(64) CHARACTER SET utf8mb4 NULL,
        outcome VARCHAR(20) CHARACTER SET utf8mb4 NOT NULL,
        provider_message_id VARCHAR(191) CHARACTER SET utf8mb4 NULL,
        error_code VARCHAR(191) CHARACTER SET utf8mb4 NULL,
        error_message TEXT CHARACTER SET utf8mb4 NULL,
        delay_seconds BIGINT NOT NULL DEFAULT 0,
        refusal VARCHAR(255) CHARACTER SET utf8mb4 NULL,
        landed TINYINT NOT NULL DEFAULT 0,
        actor VARCHAR(191) CHARACTER SET utf8mb4 NULL,
        to_status VARCHAR(20) CHARACTER SET utf8mb4 NULL
      );
    DELETE FROM email_finalize_items;
  END;
  -- One pass over the document (JSON_TABLE): each item's members, and the first rule it breaks, in
  -- the order an item is read: its shape, its members' JSON types, its outcome, its claim, then the
  -- finalize's rules. The values kept are cut to their columns; the rules judge the members' own values.
  INSERT INTO email_finalize_items
    (seq, id, claim_token, outcome, provider_message_id, error_code, error_message, delay_seconds, refusal)
  SELECT o.seq - 1,
         IF(o.id BETWEEN 1 AND 9223372036854775807, o.id, 0),
         LEFT(o.claim_token, 64),
         COALESCE(o.step, ''),
         LEFT(o.provider_message_id, 191),
         IF(o.step = 'UnknownOutcome', 'AmbiguousOutcome', LEFT(o.error_code, 191)),
         LEFT(o.error_message, 8000),
         IF(o.delay BETWEEN 0 AND 604800, o.delay, 0),
         CASE
           WHEN JSON_TYPE(o.item) <> 'OBJECT' THEN '45002 must be an object'
           -- members are found by exact name; a misspelt, repeated or unknown one leaves the count short
           WHEN JSON_LENGTH(o.item) <> (o.m_id IS NOT NULL) + (o.m_claim_token IS NOT NULL) + (o.m_outcome IS NOT NULL)
                                       + (o.m_provider_message_id IS NOT NULL) + (o.m_error_code IS NOT NULL)
                                       + (o.m_error_message IS NOT NULL) + (o.m_delay_seconds IS NOT NULL) THEN
             '45002 may hold only id, claim_token, outcome, provider_message_id, error_code, error_message and delay_seconds, each once'
           WHEN COALESCE(JSON_TYPE(o.m_id), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER') THEN '45002: id must be a positive integer'
           WHEN COALESCE(JSON_TYPE(o.m_delay_seconds), 'NULL') NOT IN ('INTEGER', 'UNSIGNED INTEGER', 'NULL') THEN
             '45002: delay_seconds must be 0 to 604800'
           WHEN COALESCE(JSON_TYPE(o.m_outcome), 'NULL') NOT IN ('STRING', 'NULL') THEN '45002: outcome must be a string'
           WHEN COALESCE(JSON_TYPE(o.m_claim_token), 'NULL') NOT IN ('STRING', 'NULL') THEN '45002: claim_token must be a string'
           WHEN COALESCE(JSON_TYPE(o.m_provider_message_id), 'NULL') NOT IN ('STRING', 'NULL') THEN
             '45002: provider_message_id must be a string'
           WHEN COALESCE(JSON_TYPE(o.m_error_code), 'NULL') NOT IN ('STRING', 'NULL') THEN '45002: error_code must be a string'
           WHEN COALESCE(JSON_TYPE(o.m_error_message), 'NULL') NOT IN ('STRING', 'NULL') THEN '45002: error_message must be a string'
           WHEN o.step IS NULL THEN '45001: outcome must be Sent, Failed, Retrying, UnknownOutcome, Released or Started'
           -- (an id past BIGINT's range is no id of a row)
           WHEN (IF(o.id > 9223372036854775807, 0, o.id) >= 1) IS NOT TRUE THEN '45001: id must be a positive integer'
           WHEN (CHAR_LENGTH(o.claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters'
           WHEN o.step = 'Started' THEN NULL
           WHEN o.step IS NULL OR o.step NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released') THEN
             '45001: outcome must be Sent, Failed, Retrying, UnknownOutcome or Released'
           WHEN o.step = 'Sent' AND (CHAR_LENGTH(o.provider_message_id) BETWEEN 1 AND 191) IS NOT TRUE THEN
             '45001: provider_message_id must be 1 to 191 characters'
           WHEN CHAR_LENGTH(o.error_code) > 191 THEN '45001: error_code must be at most 191 characters'
           WHEN o.step IN ('Retrying', 'Failed', 'Released') AND (o.delay IS NULL OR o.delay < 0 OR o.delay > 604800) THEN
             CONCAT('45001: ', 'delay_seconds', ' must be 0 to 604800')
         END
    FROM (
      SELECT j.seq, j.item, j.m_id, j.m_claim_token, j.m_outcome, j.m_provider_message_id, j.m_error_code,
             j.m_error_message, j.m_delay_seconds,
             CASE CAST(IF(JSON_TYPE(j.m_outcome) = 'STRING', JSON_UNQUOTE(j.m_outcome), NULL) AS BINARY)
               WHEN 'Sent' THEN 'Sent'
               WHEN 'Failed' THEN 'Failed'
               WHEN 'Retrying' THEN 'Retrying'
               WHEN 'UnknownOutcome' THEN 'UnknownOutcome'
               WHEN 'Released' THEN 'Released'
               WHEN 'Started' THEN 'Started'
             END AS step,
             -- a number's value only when it is an integer; a string member's text only when it is a string
             IF(JSON_TYPE(j.m_id) IN ('INTEGER', 'UNSIGNED INTEGER'), CAST(j.m_id AS DECIMAL(30)), NULL) AS id,
             IF(JSON_TYPE(j.m_delay_seconds) IN ('INTEGER', 'UNSIGNED INTEGER'), CAST(j.m_delay_seconds AS DECIMAL(30)), 0) AS delay,
             IF(JSON_TYPE(j.m_claim_token) = 'STRING', JSON_UNQUOTE(j.m_claim_token), NULL) AS claim_token,
             IF(JSON_TYPE(j.m_provider_message_id) = 'STRING', JSON_UNQUOTE(j.m_provider_message_id), NULL) AS provider_message_id,
             IF(JSON_TYPE(j.m_error_code) = 'STRING', JSON_UNQUOTE(j.m_error_code), NULL) AS error_code,
             IF(JSON_TYPE(j.m_error_message) = 'STRING', JSON_UNQUOTE(j.m_error_message), NULL) AS error_message
        FROM JSON_TABLE(p_outcomes, '$[*]' COLUMNS (
               seq FOR ORDINALITY,
               item JSON PATH '$',
               -- each member's own JSON (NULL when absent; a JSON null when null)
               m_id JSON PATH '$.id',
               m_claim_token JSON PATH '$.claim_token',
               m_outcome JSON PATH '$.outcome',
               m_provider_message_id JSON PATH '$.provider_message_id',
               m_error_code JSON PATH '$.error_code',
               m_error_message JSON PATH '$.error_message',
               m_delay_seconds JSON PATH '$.delay_seconds')) j
    ) o;
  -- What the rest of the call asks of the items, in one read: the first that breaks a rule, whether
  -- each names its own row, and whether any writes an error message.
  SELECT MIN(IF(refusal IS NULL, NULL, seq)), COUNT(DISTINCT id) = COUNT(*), MAX(outcome IN ('Failed', 'Retrying', 'UnknownOutcome'))
    INTO v_seq, v_unique, v_errors
    FROM email_finalize_items;
  -- The first item that breaks a rule refuses the whole call, naming its index; nothing is written.
  IF v_seq IS NOT NULL THEN
    SET v_refusal = (SELECT refusal FROM email_finalize_items WHERE seq = v_seq);
    IF LEFT(v_refusal, 5) = '45002' THEN
      SET v_message = CONCAT('email_finalize_batch: outcomes[', v_seq, ']', SUBSTRING(v_refusal, 6));
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
    END IF;
    IF v_refusal IS NOT NULL THEN
      BEGIN
        DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
          v_refusal;
        -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
        -- expression): one variable, as every variable is paid for on every call.
        CASE LEFT(v_refusal, 5)
          WHEN '45007' THEN
            SET v_refusal = CONCAT(CONCAT('email_finalize_batch: outcomes[', v_seq, ']'), SUBSTRING(v_refusal, 6));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
          WHEN '45010' THEN
            SET v_refusal = CONCAT(CONCAT('email_finalize_batch: outcomes[', v_seq, ']'), SUBSTRING(v_refusal, 6));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
          ELSE
            SET v_refusal = CONCAT(CONCAT('email_finalize_batch: outcomes[', v_seq, ']'), SUBSTRING(v_refusal, 6));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_refusal;
        END CASE;
      END;
    END IF;
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
  IF v_unique THEN
    -- Each claim once (every batch a worker sends): the finalizes end in one UPDATE for the rows and
    -- one INSERT for their audit events, the start marks in one UPDATE, each row fenced by its own claim.
    -- The UPDATE records in the working table, beside the change, the status it writes and the
    -- claim's owner, both read from the row before the change (the change is buffered for the
    -- attempts, the table joined second), so the events and the answer need no read of their own.
    -- The error message first, and only where there is one to write: a TEXT column in a multi-table
    -- UPDATE makes the server buffer the change in an on-disk temporary table, which costs more than
    -- the rest of the change; a batch of sends has none.
    IF v_errors THEN
      UPDATE email_finalize_items s
             STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = s.id
         SET a.last_error_message = LEFT(s.error_message, 8000)
       WHERE s.outcome IN ('Failed', 'Retrying', 'UnknownOutcome')
         AND a.claim_token = s.claim_token COLLATE utf8mb4_bin
         AND a.status = 'Processing';
    END IF;
    UPDATE email_finalize_items s
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = s.id
       SET a.status = CASE s.outcome
                        WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                        WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                        ELSE s.outcome
                      END,
           a.next_attempt_at = IF(s.outcome = 'Released' OR (s.outcome = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                                  v_now + INTERVAL s.delay_seconds SECOND, a.next_attempt_at),
           a.last_attempt_at = IF(s.outcome <> 'Released', v_now, a.last_attempt_at),
           a.last_error_code = IF(s.outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), s.error_code, a.last_error_code),
           a.provider_message_id = IF(s.outcome = 'Sent', s.provider_message_id, a.provider_message_id),
           a.sent_at = IF(s.outcome = 'Sent', v_now, a.sent_at),
           a.attempt_count = a.attempt_count + IF(s.outcome <> 'Released', 1, 0),
           a.claim_token = NULL,
           a.lease_expires_at = NULL,
           a.claimed_from_status = NULL,
           a.reserved_at = NULL,
           a.row_version = a.row_version + 1,
           a.updated_at = v_now,
           s.landed = 1,
           s.to_status = CASE s.outcome
                           WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                           WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                           ELSE s.outcome
                         END,
           s.actor = a.claimed_by
     WHERE s.outcome <> 'Started'
       AND a.claim_token = s.claim_token COLLATE utf8mb4_bin
       AND a.status = 'Processing';
    IF ROW_COUNT() > 0 THEN
      INSERT INTO email_delivery_events
        (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
      SELECT s.id, v_now, 'Processing', s.to_status, s.claim_token, s.actor, SESSION_USER(),
             CASE
               WHEN s.outcome = 'Sent' THEN CONCAT('provider_message_id=', s.provider_message_id)
               WHEN s.outcome = 'UnknownOutcome' THEN
                 LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(s.error_message, '?')), 2000)
               WHEN s.outcome = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(s.error_code, '?'))
               WHEN s.outcome = 'Retrying' AND s.to_status = 'Failed' THEN
                 CONCAT('attempts used up: ', COALESCE(s.error_code, '?'))
               WHEN s.outcome = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(s.error_code, '?'))
               ELSE CONCAT('released, due again in ', s.delay_seconds, 's')
             END
        FROM email_finalize_items s
       WHERE s.landed = 1
       ORDER BY s.seq;
    END IF;
    UPDATE email_finalize_items s
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = s.id
       SET a.reserved_at = NULL,
           s.landed = 1,
           s.to_status = 'Processing'
     WHERE s.outcome = 'Started'
       AND a.claim_token = s.claim_token COLLATE utf8mb4_bin
       AND a.status = 'Processing'
       AND a.reserved_at IS NOT NULL
       AND a.lease_expires_at > v_now
       AND (a.expires_at IS NULL OR a.expires_at > v_now);
    IF EXISTS (SELECT 1 FROM email_finalize_items WHERE outcome = 'Started' AND landed = 0) THEN
      SET v_done = 0;
      OPEN c_unstarted;
      each_unstarted: LOOP
        FETCH c_unstarted INTO v_id;
        IF v_done = 1 THEN
          LEAVE each_unstarted;
        END IF;
        BEGIN
          -- No such row is an answer (nothing changed), not a condition for the caller.
          DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
          SET v_to = NULL;
          -- First a plain read, which locks nothing: a row that is being sent, or finished, is left without a
          -- lock, so a caller whose transaction stays open after a call that changed nothing holds up no
          -- worker's finalize (issue 37). Only a row that may change is locked and read again. (A caller
          -- whose snapshot is older than the row's start still locks it; the worker waits on such a lock for
          -- its short lock wait timeout only.)
          SELECT status INTO v_to
            FROM email_delivery_attempts FORCE INDEX (PRIMARY)
           WHERE id = v_id
             AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL));
          IF v_to IS NOT NULL THEN
            SET v_to = NULL;
            SELECT status INTO v_to
              FROM email_delivery_attempts FORCE INDEX (PRIMARY)
             WHERE id = v_id
               AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL))
               AND (expires_at <= v_now)
               FOR UPDATE;
            IF v_to IS NOT NULL THEN
              -- The row is ours until commit: its event reads the claim token and the expiry first, then the
              -- change clears the claim.
              INSERT INTO email_delivery_events
                (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
              SELECT id, v_now, status, 'Failed', claim_token, 'start-check', SESSION_USER(), CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC')
                FROM email_delivery_attempts FORCE INDEX (PRIMARY)
               WHERE id = v_id;
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
               WHERE id = v_id;
            END IF;
          END IF;
        END;
      END LOOP;
      CLOSE c_unstarted;
    END IF;
  ELSE
    -- An id named twice: one item at a time, in the order given, so each sees the one before it.
    SET v_done = 0;
    OPEN c_items;
    each_item: LOOP
      FETCH c_items INTO v_seq, v_id, v_token, v_outcome, v_provider_message_id, v_error_code, v_error_message, v_delay;
      IF v_done = 1 THEN
        LEAVE each_item;
      END IF;
      IF v_outcome = 'Started' THEN
        UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
           SET a.reserved_at = NULL
         WHERE a.id = v_id
           AND a.claim_token = v_token COLLATE utf8mb4_bin
           AND a.status = 'Processing'
           AND a.reserved_at IS NOT NULL
           AND a.lease_expires_at > v_now
           AND (a.expires_at IS NULL OR a.expires_at > v_now);
        IF ROW_COUNT() = 1 THEN
          SET v_to = 'Processing';
        ELSE
          BEGIN
            -- No such row is an answer (nothing changed), not a condition for the caller.
            DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
            SET v_to = NULL;
            -- First a plain read, which locks nothing: a row that is being sent, or finished, is left without a
            -- lock, so a caller whose transaction stays open after a call that changed nothing holds up no
            -- worker's finalize (issue 37). Only a row that may change is locked and read again. (A caller
            -- whose snapshot is older than the row's start still locks it; the worker waits on such a lock for
            -- its short lock wait timeout only.)
            SELECT status INTO v_to
              FROM email_delivery_attempts FORCE INDEX (PRIMARY)
             WHERE id = v_id
               AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL));
            IF v_to IS NOT NULL THEN
              SET v_to = NULL;
              SELECT status INTO v_to
                FROM email_delivery_attempts FORCE INDEX (PRIMARY)
               WHERE id = v_id
                 AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL))
                 AND (expires_at <= v_now)
                 FOR UPDATE;
              IF v_to IS NOT NULL THEN
                -- The row is ours until commit: its event reads the claim token and the expiry first, then the
                -- change clears the claim.
                INSERT INTO email_delivery_events
                  (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
                SELECT id, v_now, status, 'Failed', claim_token, 'start-check', SESSION_USER(), CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC')
                  FROM email_delivery_attempts FORCE INDEX (PRIMARY)
                 WHERE id = v_id;
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
                 WHERE id = v_id;
              END IF;
            END IF;
          END;
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
                                      v_now + INTERVAL COALESCE(v_delay, 0) SECOND, a.next_attempt_at),
               a.last_attempt_at = IF(v_outcome <> 'Released', v_now, a.last_attempt_at),
               a.last_error_code = IF(v_outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', v_error_code), a.last_error_code),
               a.provider_message_id = IF(v_outcome = 'Sent', v_provider_message_id, a.provider_message_id),
               a.sent_at = IF(v_outcome = 'Sent', v_now, a.sent_at),
               a.attempt_count = a.attempt_count + IF(v_outcome <> 'Released', 1, 0),
               a.claim_token = NULL,
               a.lease_expires_at = NULL,
               a.claimed_from_status = NULL,
               a.reserved_at = NULL,
               a.row_version = a.row_version + 1,
               a.updated_at = v_now,
               a.last_error_message = IF(v_outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), LEFT(v_error_message, 8000), a.last_error_message)
         WHERE a.id = v_id
           AND a.claim_token = v_token COLLATE utf8mb4_bin
           AND a.status = 'Processing';
        IF ROW_COUNT() = 1 THEN
          -- The audit event from the row just written (its status, its claimant), in one statement.
          INSERT INTO email_delivery_events
            (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
          SELECT a.id, v_now, 'Processing', a.status, v_token, a.claimed_by, SESSION_USER(),
                 CASE
                   WHEN v_outcome = 'Sent' THEN CONCAT('provider_message_id=', v_provider_message_id)
                   WHEN v_outcome = 'UnknownOutcome' THEN
                     LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(v_error_message, '?')), 2000)
                   WHEN v_outcome = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', v_error_code), '?'))
                   WHEN v_outcome = 'Retrying' AND a.status = 'Failed' THEN
                     CONCAT('attempts used up: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', v_error_code), '?'))
                   WHEN v_outcome = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(IF(v_outcome = 'UnknownOutcome', 'AmbiguousOutcome', v_error_code), '?'))
                   ELSE CONCAT('released, due again in ', COALESCE(v_delay, 0), 's')
                 END
            FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
           WHERE a.id = v_id;
          -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
          -- from) write a status that depends on the row.
          IF v_outcome IN ('Sent', 'Failed', 'UnknownOutcome') THEN
            SET v_to = CASE v_outcome WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' ELSE 'UnknownOutcome' END;
          ELSE
            SELECT a.status INTO v_to FROM email_delivery_attempts a FORCE INDEX (PRIMARY) WHERE a.id = v_id;
          END IF;
        ELSE
          SET v_to = NULL;
        END IF;
      END IF;
      UPDATE email_finalize_items SET landed = IF(v_to IS NULL, 0, 1), to_status = v_to WHERE seq = v_seq;
    END LOOP;
    CLOSE c_items;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  -- The answer is built from the items themselves, one row each in their order, and only looks up
  -- what became of each in the working table, by its position, row, claim and outcome: an item the
  -- working table does not hold as given (its rows are transactional, so a rollback the call did not
  -- see can take them, or bring back another call's) is answered as not landed, never left out and
  -- never given another item's answer, so a caller pairing rows with items by position cannot be
  -- shifted, and a start is never confirmed that this call did not make.
  SELECT j.seq - 1 AS seq, j.id, COALESCE(s.landed, 0) AS affected, IF(s.landed = 1, s.to_status, NULL) AS status
    FROM JSON_TABLE(p_outcomes, '$[*]' COLUMNS (
           seq FOR ORDINALITY,
           id BIGINT PATH '$.id',
           claim_token VARCHAR(64) CHARACTER SET utf8mb4 PATH '$.claim_token',
           outcome VARCHAR(20) CHARACTER SET utf8mb4 PATH '$.outcome')) j
    LEFT JOIN email_finalize_items s
           ON s.seq = j.seq - 1
          AND s.id = j.id
          AND s.claim_token = j.claim_token COLLATE utf8mb4_bin
          AND s.outcome = j.outcome COLLATE utf8mb4_bin
   ORDER BY j.seq;
END
