-- Internal: email_internal_settle's change for every row of the session's working table email_settle_rows
-- at once (email_internal_settle_rows_clear opens it; email_finalize_batch's set path,
-- email_internal_finalize_rows, fills it). The change and the audit event are settle's, written as one
-- statement each for the set: a change to one is a change to both, and
-- tests/contract/test_contract_finalize_batch.py holds them to the same rows and events. A single claim
-- goes through settle's own UPDATE: through this working table it cost the database a third more. A row
-- this claim still holds (id, claim token, Processing) leaves Processing, every claim column is cleared,
-- and its audit event is written, all rows in one unit of work: one UPDATE and one INSERT for N claims,
-- not N of each, which is what a finalize costs the database. Each row is fenced by its own claim: one no
-- longer held is left as it is.
-- Working-table columns, one row per claim:
--   outcome   'Sent'            provider_message_id and sent_at set
--             'Failed'          a permanent failure
--             'Retrying'        due again after delay_seconds; Failed instead on the attempt that
--                               uses up max_attempts
--             'UnknownOutcome'  never resent automatically
--             'Released'        not sent: back to the status it was claimed from, attempt not counted,
--                               due again after delay_seconds
--   actor, detail  NULL: the claimant, and the outcome's standard detail
-- p_expired_by is the sweep's fence: the lease must have ended by then (NULL: any live claim), and
-- for 'Released' the send must not have started (reserved_at still set); a swept attempt is dated
-- from its claim, not from now. Callers check their own arguments first, and give each id once.
-- Afterwards `landed` is 1 and `to_status` the status written for every claim that ended here.
CREATE PROCEDURE email_internal_settle_rows(
  IN p_expired_by DATETIME(6)
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_begin(v_own);
  -- The error message first, and only where there is one to write: a TEXT column in a multi-table
  -- UPDATE makes the server buffer the change in an on-disk temporary table, which costs more than
  -- the rest of the change; a batch of sends has none. Same fence as below, under the same locks.
  IF EXISTS (SELECT 1 FROM email_settle_rows WHERE outcome IN ('Failed', 'Retrying', 'UnknownOutcome')) THEN
    UPDATE email_settle_rows s
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = s.id
       SET a.last_error_message = LEFT(s.error_message, 8000)
     WHERE s.outcome IN ('Failed', 'Retrying', 'UnknownOutcome')
       AND a.claim_token = s.claim_token COLLATE utf8mb4_bin
       AND a.status = 'Processing'
       AND (p_expired_by IS NULL OR a.lease_expires_at <= p_expired_by);
  END IF;
  -- Every expression reads attempt_count, claimed_at and claimed_from_status before they are
  -- assigned, so the row written is the same whether the server assigns left to right or
  -- simultaneously (MariaDB's SIMULTANEOUS_ASSIGNMENT, or a buffered table of a multi-table UPDATE).
  UPDATE email_settle_rows s
         STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = s.id
     SET a.status = CASE s.outcome
                      WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                      WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                      ELSE s.outcome
                    END,
         a.next_attempt_at = IF(s.outcome = 'Released'
                                OR (s.outcome = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                                v_now + INTERVAL s.delay_seconds SECOND, a.next_attempt_at),
         a.last_attempt_at = IF(s.outcome <> 'Released', IF(p_expired_by IS NULL, v_now, a.claimed_at),
                                a.last_attempt_at),
         a.last_error_code = IF(s.outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), s.error_code,
                                a.last_error_code),
         a.provider_message_id = IF(s.outcome = 'Sent', s.provider_message_id, a.provider_message_id),
         a.sent_at = IF(s.outcome = 'Sent', v_now, a.sent_at),
         a.attempt_count = a.attempt_count + IF(s.outcome <> 'Released', 1, 0),
         a.claim_token = NULL,
         a.lease_expires_at = NULL,
         a.claimed_from_status = NULL,
         a.reserved_at = NULL,
         a.row_version = a.row_version + 1,
         a.updated_at = v_now,
         s.landed = 1
   WHERE s.outcome <> 'Started'  -- start marks are email_internal_start_rows'
     AND a.claim_token = s.claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
     AND (p_expired_by IS NULL OR a.lease_expires_at <= p_expired_by)
     -- The sweep releases only a reservation whose send never started, read again under the row lock.
     AND (p_expired_by IS NULL OR s.outcome <> 'Released' OR a.reserved_at IS NOT NULL);
  IF ROW_COUNT() > 0 THEN
    -- Our own writes: read back whatever this transaction's snapshot, under the row locks just taken.
    UPDATE email_settle_rows s
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = s.id
       SET s.to_status = a.status,
           s.actor = COALESCE(s.actor, a.claimed_by)
     WHERE s.landed = 1;
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT s.id, v_now, 'Processing', s.to_status, s.claim_token, s.actor, SESSION_USER(),
           COALESCE(s.detail, CASE
             WHEN s.outcome = 'Sent' THEN CONCAT('provider_message_id=', s.provider_message_id)
             WHEN s.outcome = 'UnknownOutcome' THEN
               LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(s.error_message, '?')), 2000)
             WHEN s.outcome = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(s.error_code, '?'))
             WHEN s.outcome = 'Retrying' AND s.to_status = 'Failed' THEN
               CONCAT('attempts used up: ', COALESCE(s.error_code, '?'))
             WHEN s.outcome = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(s.error_code, '?'))
             ELSE CONCAT('released, due again in ', s.delay_seconds, 's')
           END)
      FROM email_settle_rows s
     WHERE s.landed = 1
     ORDER BY s.seq;
  END IF;
  CALL email_internal_end(v_own);
END
