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
  {{>undo_on_error | own = v_own}}
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
           {{>id_refusal | id = IF(o.id > 9223372036854775807, 0, o.id)}}
           {{>token_refusal | token = o.claim_token}}
           WHEN o.step = 'Started' THEN NULL
           {{>finalize_refusals | outcome = o.step | provider_message_id = o.provider_message_id | error_code = o.error_code | delay = o.delay | delay_field = 'delay_seconds'}}
         END
    FROM (
      SELECT j.seq, j.item, j.m_id, j.m_claim_token, j.m_outcome, j.m_provider_message_id, j.m_error_code,
             j.m_error_message, j.m_delay_seconds,
             {{>step_status | step = IF(JSON_TYPE(j.m_outcome) = 'STRING', JSON_UNQUOTE(j.m_outcome), NULL)}} AS step,
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
  SELECT MIN(IF(refusal IS NULL, NULL, seq)), COUNT(DISTINCT id) = COUNT(*), MAX({{>writes_error | outcome = outcome}})
    INTO v_seq, v_unique, v_errors
    FROM email_finalize_items;
  -- The first item that breaks a rule refuses the whole call, naming its index; nothing is written.
  IF v_seq IS NOT NULL THEN
    SET v_refusal = (SELECT refusal FROM email_finalize_items WHERE seq = v_seq);
    IF LEFT(v_refusal, 5) = '45002' THEN
      SET v_message = CONCAT('email_finalize_batch: outcomes[', v_seq, ']', SUBSTRING(v_refusal, 6));
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
    END IF;
    {{>refuse | where = CONCAT('email_finalize_batch: outcomes[', v_seq, ']') | refusal = v_refusal}}
  END IF;
  {{>unit_begin | own = v_own}}
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
       WHERE {{>writes_error | outcome = s.outcome}}
         {{>settle_fence | token = s.claim_token | outcome = s.outcome | expired_by = NULL}};
    END IF;
    UPDATE email_finalize_items s
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = s.id
       SET {{>settle_changes | outcome = s.outcome | delay = s.delay_seconds | error_code = s.error_code | provider_message_id = s.provider_message_id | expired_by = NULL | now = v_now}},
           s.landed = 1,
           s.to_status = {{>settle_status | outcome = s.outcome}},
           s.actor = a.claimed_by
     WHERE s.outcome <> 'Started'
       {{>settle_fence | token = s.claim_token | outcome = s.outcome | expired_by = NULL}};
    IF ROW_COUNT() > 0 THEN
      INSERT INTO email_delivery_events
        (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
      SELECT s.id, v_now, 'Processing', s.to_status, s.claim_token, s.actor, SESSION_USER(),
             {{>settle_detail | detail = NULL | outcome = s.outcome | provider_message_id = s.provider_message_id | error_code = s.error_code | error_message = s.error_message | delay = s.delay_seconds | to_status = s.to_status}}
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
       {{>start_fence | token = s.claim_token | now = v_now}};
    IF EXISTS (SELECT 1 FROM email_finalize_items WHERE outcome = 'Started' AND landed = 0) THEN
      SET v_done = 0;
      OPEN c_unstarted;
      each_unstarted: LOOP
        FETCH c_unstarted INTO v_id;
        IF v_done = 1 THEN
          LEAVE each_unstarted;
        END IF;
        {{>start_refused | id = v_id | now = v_now | scratch = v_to}}
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
        {{>start_one | id = v_id | token = v_token | now = v_now | to_status = v_to}}
      ELSE
        {{>finalize_settle | id = v_id | token = v_token | outcome = v_outcome | provider_message_id = v_provider_message_id | error_code = v_error_code | error_message = v_error_message | delay = v_delay | to_status = v_to}}
      END IF;
      UPDATE email_finalize_items SET landed = IF(v_to IS NULL, 0, 1), to_status = v_to WHERE seq = v_seq;
    END LOOP;
    CLOSE c_items;
  END IF;
  {{>unit_end | own = v_own}}
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
