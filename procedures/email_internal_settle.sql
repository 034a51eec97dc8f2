-- Internal: the end of one claim (procedures/source/fragments/settle_one.sql, the same change every
-- finalize makes) in its own unit of work, for the lease sweep, which CALLs it per expired claim.
--   p_outcome  'Sent', 'Failed', 'Retrying', 'UnknownOutcome' or 'Released' (settle_changes.sql)
--   p_expired_by  the sweep's fence: the lease must have ended by then (NULL: any live claim), and
--                 for 'Released' the send must not have started (reserved_at still set)
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
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
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
     SET a.status = CASE p_outcome
                      WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
                      WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
                      ELSE p_outcome
                    END,
         a.next_attempt_at = IF(p_outcome = 'Released' OR (p_outcome = 'Retrying' AND a.attempt_count + 1 < a.max_attempts),
                                v_now + INTERVAL p_delay_seconds SECOND, a.next_attempt_at),
         a.last_attempt_at = IF(p_outcome <> 'Released', IF(p_expired_by IS NULL, v_now, a.claimed_at), a.last_attempt_at),
         a.last_error_code = IF(p_outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), p_error_code, a.last_error_code),
         a.provider_message_id = IF(p_outcome = 'Sent', p_provider_message_id, a.provider_message_id),
         a.sent_at = IF(p_outcome = 'Sent', v_now, a.sent_at),
         a.attempt_count = a.attempt_count + IF(p_outcome <> 'Released', 1, 0),
         a.claim_token = NULL,
         a.lease_expires_at = NULL,
         a.claimed_from_status = NULL,
         a.reserved_at = NULL,
         a.row_version = a.row_version + 1,
         a.updated_at = v_now,
         a.last_error_message = IF(p_outcome IN ('Failed', 'Retrying', 'UnknownOutcome'), LEFT(p_error_message, 8000), a.last_error_message)
   WHERE a.id = p_id
     AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
     AND (p_expired_by IS NULL OR a.lease_expires_at <= p_expired_by)
     AND (p_expired_by IS NULL OR p_outcome <> 'Released' OR a.reserved_at IS NOT NULL);
  IF ROW_COUNT() = 1 THEN
    -- The audit event from the row just written (its status, its claimant), in one statement.
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT a.id, v_now, 'Processing', a.status, p_claim_token, COALESCE(p_actor, a.claimed_by), SESSION_USER(),
           COALESCE(p_detail, CASE
             WHEN p_outcome = 'Sent' THEN CONCAT('provider_message_id=', p_provider_message_id)
             WHEN p_outcome = 'UnknownOutcome' THEN
               LEFT(CONCAT('ambiguous provider outcome: ', COALESCE(p_error_message, '?')), 2000)
             WHEN p_outcome = 'Failed' THEN CONCAT('permanent failure: ', COALESCE(p_error_code, '?'))
             WHEN p_outcome = 'Retrying' AND a.status = 'Failed' THEN
               CONCAT('attempts used up: ', COALESCE(p_error_code, '?'))
             WHEN p_outcome = 'Retrying' THEN CONCAT('transient failure: ', COALESCE(p_error_code, '?'))
             ELSE CONCAT('released, due again in ', p_delay_seconds, 's')
           END)
      FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
     WHERE a.id = p_id;
    -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
    -- from) write a status that depends on the row.
    IF p_outcome IN ('Sent', 'Failed', 'UnknownOutcome') THEN
      SET p_to_status = CASE p_outcome WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' ELSE 'UnknownOutcome' END;
    ELSE
      SELECT a.status INTO p_to_status FROM email_delivery_attempts a FORCE INDEX (PRIMARY) WHERE a.id = p_id;
    END IF;
  ELSE
    SET p_to_status = NULL;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
END
