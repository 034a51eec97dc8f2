-- Several finalizes in one call and one transaction: what a worker does when several of its sends end
-- together. p_outcomes is a JSON array of 1 to 1000 objects, each with exactly these members:
--   id, claim_token                  the claim, as for the single finalizes (required)
--   outcome                          the status to write, 'Sent', 'Failed', 'Retrying', 'UnknownOutcome'
--                                    or 'Released', or 'Started' (required; the lower-case names of the
--                                    previous release are deprecated aliases: email_internal_step_status)
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
  DECLARE v_count INT;
  DECLARE v_index INT DEFAULT 0;
  DECLARE v_item LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_where VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4;
  DECLARE v_step VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_outcome VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_id BIGINT;
  DECLARE v_members INT;
  DECLARE v_delay BIGINT;
  DECLARE v_token LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_provider_message_id LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_error_code LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_error_message LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_done INT DEFAULT 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_outcomes IS NULL OR NOT JSON_VALID(p_outcomes) OR JSON_TYPE(p_outcomes) <> 'ARRAY'
     OR JSON_LENGTH(p_outcomes) < 1 OR JSON_LENGTH(p_outcomes) > 1000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = 'email_finalize_batch: outcomes must be a JSON array of 1 to 1000 objects';
  END IF;
  SET v_count = JSON_LENGTH(p_outcomes);
  CALL email_internal_begin(v_own);
  -- A batch of plain finalizes ends in one statement each for the rows and their audit events
  -- (email_internal_finalize_rows); anything else goes item by item.
  IF v_count >= 2 THEN
    CALL email_internal_finalize_rows(p_outcomes, v_done);
  END IF;
  IF v_done = 1 THEN
    CALL email_internal_end(v_own);
    SELECT seq, id, landed AS affected, to_status AS status FROM email_settle_rows ORDER BY seq;
  ELSE
    CREATE TEMPORARY TABLE IF NOT EXISTS email_finalize_batch_results (
      seq INT NOT NULL PRIMARY KEY,
      id BIGINT NOT NULL,
      affected TINYINT NOT NULL,
      status VARCHAR(20) CHARACTER SET utf8mb4 NULL
    ) ENGINE = MEMORY;
    DELETE FROM email_finalize_batch_results;
    WHILE v_index < v_count DO
      SET v_item = JSON_EXTRACT(p_outcomes, CONCAT('$[', v_index, ']'));
      SET v_where = CONCAT('email_finalize_batch: outcomes[', v_index, ']');
      IF JSON_TYPE(v_item) <> 'OBJECT' THEN
        SET v_message = CONCAT(v_where, ' must be an object');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
      END IF;
      -- Members are found by exact name; a misspelt, repeated or unknown one leaves the count short.
      SET v_members = (JSON_EXTRACT(v_item, '$.id') IS NOT NULL) + (JSON_EXTRACT(v_item, '$.claim_token') IS NOT NULL)
        + (JSON_EXTRACT(v_item, '$.outcome') IS NOT NULL) + (JSON_EXTRACT(v_item, '$.provider_message_id') IS NOT NULL)
        + (JSON_EXTRACT(v_item, '$.error_code') IS NOT NULL) + (JSON_EXTRACT(v_item, '$.error_message') IS NOT NULL)
        + (JSON_EXTRACT(v_item, '$.delay_seconds') IS NOT NULL);
      IF v_members <> JSON_LENGTH(v_item) THEN
        SET v_message = CONCAT(v_where, ' may hold only id, claim_token, outcome, provider_message_id,',
                               ' error_code, error_message and delay_seconds, each once');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
      END IF;
      IF COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.id')), '') NOT IN ('INTEGER', 'UNSIGNED INTEGER') THEN
        SET v_message = CONCAT(v_where, ': id must be a positive integer');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
      END IF;
      IF COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.delay_seconds')), 'INTEGER') NOT IN ('INTEGER', 'UNSIGNED INTEGER', 'NULL') THEN
        SET v_message = CONCAT(v_where, ': delay_seconds must be 0 to 604800');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
      END IF;
      SET v_id = JSON_EXTRACT(v_item, '$.id');
      SET v_delay = IF(COALESCE(JSON_TYPE(JSON_EXTRACT(v_item, '$.delay_seconds')), 'NULL') = 'NULL', 0,
                       JSON_EXTRACT(v_item, '$.delay_seconds'));
      CALL email_internal_json_text(v_where, v_item, '$.outcome', 'outcome', v_step);
      CALL email_internal_json_text(v_where, v_item, '$.claim_token', 'claim_token', v_token);
      CALL email_internal_json_text(v_where, v_item, '$.provider_message_id', 'provider_message_id', v_provider_message_id);
      CALL email_internal_json_text(v_where, v_item, '$.error_code', 'error_code', v_error_code);
      CALL email_internal_json_text(v_where, v_item, '$.error_message', 'error_message', v_error_message);
      CALL email_internal_step_status(v_step, v_outcome);
      IF v_outcome IS NULL THEN
        SET v_message = CONCAT(v_where, ': outcome must be Sent, Failed, Retrying, UnknownOutcome, Released or Started');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      IF v_outcome = 'Started' THEN
        CALL email_internal_check_claim(v_where, v_id, v_token);
        CALL email_internal_start(v_id, v_token, v_to);
      ELSE
        CALL email_internal_finalize(v_where, v_id, v_token, v_outcome, v_provider_message_id, v_error_code,
          v_error_message, 'delay_seconds', v_delay, v_to);
      END IF;
      INSERT INTO email_finalize_batch_results (seq, id, affected, status)
      VALUES (v_index, v_id, IF(v_to IS NULL, 0, 1), v_to);
      SET v_index = v_index + 1;
    END WHILE;
    CALL email_internal_end(v_own);
    SELECT seq, id, affected, status FROM email_finalize_batch_results ORDER BY seq;
  END IF;
END
