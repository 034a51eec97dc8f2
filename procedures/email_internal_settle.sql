-- Internal: the one way a claim ends, one claim at a time (email_internal_settle_rows makes the same
-- change to a set of claims at once: a change to one is a change to both, and
-- tests/contract/test_contract_finalize_batch.py holds them to the same rows and events). A row this
-- claim still holds (id, claim token, Processing) leaves Processing, every claim column is cleared, and
-- its audit event is written, in one unit of work. Every finalize procedure, the release and the lease
-- sweep end claims through here.
--   p_outcome 'Sent'            provider_message_id and sent_at set
--             'Failed'          a permanent failure
--             'Retrying'        due again after p_delay_seconds; Failed instead on the attempt that
--                               uses up max_attempts
--             'UnknownOutcome'  never resent automatically
--             'Released'        not sent: back to the status it was claimed from, attempt not counted,
--                               due again after p_delay_seconds
--   p_expired_by  the sweep's fence: the lease must have ended by then (NULL: any live claim), and
--                 for 'Released' the send must not have started (reserved_at still set);
--                 a swept attempt is dated from its claim, not from now
--   p_actor, p_detail  NULL: the claimant, and the outcome's standard detail
-- Callers check their own arguments first. p_to_status is the status written (NULL: the claim was
-- no longer held, and nothing changed).
CREATE PROCEDURE email_internal_settle(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_outcome VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_delay_seconds BIGINT,
  IN p_error_code TEXT CHARACTER SET utf8mb4,
  IN p_error_message TEXT CHARACTER SET utf8mb4,
  IN p_provider_message_id TEXT CHARACTER SET utf8mb4,
  IN p_expired_by DATETIME(6),
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_detail TEXT CHARACTER SET utf8mb4,
  OUT p_to_status VARCHAR(20) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_attempted INT DEFAULT IF(p_outcome = 'Released', 0, 1);
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  SET p_to_status = NULL;
  CALL email_internal_begin(v_own);
  -- Every expression reads attempt_count, claimed_at and claimed_from_status before they are
  -- assigned, so the row written is the same under MySQL's left-to-right assignment and MariaDB's
  -- SIMULTANEOUS_ASSIGNMENT.
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET status = CASE p_outcome
                    WHEN 'Released' THEN COALESCE(claimed_from_status, 'Pending')
                    WHEN 'Retrying' THEN IF(attempt_count + 1 >= max_attempts, 'Failed', 'Retrying')
                    ELSE p_outcome
                  END,
         next_attempt_at = IF(p_outcome = 'Released'
                              OR (p_outcome = 'Retrying' AND attempt_count + 1 < max_attempts),
                              v_now + INTERVAL p_delay_seconds SECOND, next_attempt_at),
         last_attempt_at = IF(v_attempted = 1, IF(p_expired_by IS NULL, v_now, claimed_at), last_attempt_at),
         last_error_code = IF(p_outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), p_error_code, last_error_code),
         last_error_message = IF(p_outcome IN ('Failed', 'Retrying', 'UnknownOutcome'),
                                 LEFT(p_error_message, 8000), last_error_message),
         provider_message_id = IF(p_outcome = 'Sent', p_provider_message_id, provider_message_id),
         sent_at = IF(p_outcome = 'Sent', v_now, sent_at),
         attempt_count = attempt_count + v_attempted,
         claim_token = NULL,
         lease_expires_at = NULL,
         claimed_from_status = NULL,
         reserved_at = NULL,
         row_version = row_version + 1,
         updated_at = v_now
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing'
     AND (p_expired_by IS NULL OR lease_expires_at <= p_expired_by)
     -- The sweep releases only a reservation whose send never started, read again under the row lock.
     AND (p_expired_by IS NULL OR p_outcome <> 'Released' OR reserved_at IS NOT NULL);
  IF ROW_COUNT() = 1 THEN
    -- The audit event from the row just written (its status, its claimant), in one statement: a
    -- re-read into variables and a CALL of email_internal_record_event cost the server more.
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT id, v_now, 'Processing', status, p_claim_token, COALESCE(p_actor, claimed_by), SESSION_USER(),
           COALESCE(p_detail, CASE
             WHEN p_outcome = 'Sent' THEN CONCAT('provider_message_id=', p_provider_message_id)
             WHEN p_outcome = 'UnknownOutcome' THEN
               LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(p_error_message, '?')), 2000)
             WHEN p_outcome = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(p_error_code, '?'))
             WHEN p_outcome = 'Retrying' AND status = 'Failed' THEN
               CONCAT('attempts used up: ', COALESCE(p_error_code, '?'))
             WHEN p_outcome = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(p_error_code, '?'))
             ELSE CONCAT('released, due again in ', p_delay_seconds, 's')
           END)
      FROM email_delivery_attempts FORCE INDEX (PRIMARY)
     WHERE id = p_id;
    -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
    -- from) write a status that depends on the row. The others are named as the row spells them,
    -- whatever the case the caller wrote the outcome in.
    IF p_outcome IN ('Sent', 'Failed', 'UnknownOutcome') THEN
      SET p_to_status = CASE p_outcome WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' ELSE 'UnknownOutcome' END;
    ELSE
      SELECT status INTO p_to_status FROM email_delivery_attempts FORCE INDEX (PRIMARY) WHERE id = p_id;
    END IF;
  END IF;
  CALL email_internal_end(v_own);
END
