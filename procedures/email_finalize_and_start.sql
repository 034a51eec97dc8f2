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
  DECLARE v_outcome VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_started VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_step_status(p_outcome, v_outcome);
  CALL email_internal_begin(v_own);
  CALL email_internal_finalize('email_finalize_and_start', p_id, p_claim_token, v_outcome,
    p_provider_message_id, p_error_code, p_error_message, 'delay_seconds', COALESCE(p_delay_seconds, 0), v_to);
  CALL email_internal_check_claim('email_finalize_and_start: next', p_next_id, p_next_claim_token);
  CALL email_internal_start(p_next_id, p_next_claim_token, v_started);
  CALL email_internal_end(v_own);
  SELECT IF(v_to IS NULL, 0, 1) AS affected, v_to AS status, IF(v_started IS NULL, 0, 1) AS started;
END
