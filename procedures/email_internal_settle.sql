-- Internal: the one way a claim ends, one claim at a time (email_internal_settle_rows does the work, for
-- one claim here and for many in email_finalize_batch). A row this claim still holds (id, claim token, Processing) leaves
-- Processing, every claim column is cleared, and its audit event is written, in one unit of work.
-- Every finalize procedure, the release and the lease sweep end claims through here.
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
  -- The working table, not this call's own UPDATE: the change and its audit event are written in one
  -- place (email_internal_settle_rows), whether one claim ends or many.
  CALL email_internal_settle_rows_clear();
  INSERT INTO email_settle_rows
    (seq, id, claim_token, outcome, provider_message_id, error_code, error_message, delay_seconds, actor, detail)
  VALUES (0, p_id, p_claim_token, p_outcome, p_provider_message_id, p_error_code, LEFT(p_error_message, 8000),
          p_delay_seconds, p_actor, p_detail);
  CALL email_internal_settle_rows(p_expired_by);
  SELECT to_status INTO p_to_status FROM email_settle_rows WHERE seq = 0;
END
