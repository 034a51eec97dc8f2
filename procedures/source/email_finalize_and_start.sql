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
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_started VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  {{>undo_on_error | own = v_own}}
  -- A send accepted is nearly every call: its checks and its change are generated with the outcome
  -- 'Sent', which the generator folds to what a Sent is (and the test of the outcome to one
  -- comparison), so the server evaluates no outcome variable and no other outcome's branch. The next row's refusal follows the finalize's in
  -- the same expression, its message's rest after "next" (refuse: the errno is the first 5 characters).
  IF {{>step_status | step = p_outcome}} = 'Sent' THEN
    {{>refuse | where = 'email_finalize_and_start' | refusal = COALESCE({{>finalize_refusal | id = p_id | token = p_claim_token | more_refusals = | outcome = 'Sent' | provider_message_id = p_provider_message_id | error_code = p_error_code | delay = COALESCE(p_delay_seconds, 0) | delay_field = 'delay_seconds'}}, INSERT(CASE {{>id_refusal | id = p_next_id}} {{>token_refusal | token = p_next_claim_token}} END, 6, 0, ': next'))}}
    {{>unit_begin | own = v_own}}
    {{>finalize_settle | id = p_id | token = p_claim_token | outcome = 'Sent' | provider_message_id = p_provider_message_id | error_code = p_error_code | error_message = p_error_message | delay = p_delay_seconds | to_status = v_to}}
  ELSE
    BEGIN
      -- Declared here, where it is used: a variable costs every call that declares it.
      DECLARE v_outcome VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT {{>step_status | step = p_outcome}};
      {{>refuse | where = 'email_finalize_and_start' | refusal = COALESCE({{>finalize_refusal | id = p_id | token = p_claim_token | more_refusals = | outcome = v_outcome | provider_message_id = p_provider_message_id | error_code = p_error_code | delay = COALESCE(p_delay_seconds, 0) | delay_field = 'delay_seconds'}}, INSERT(CASE {{>id_refusal | id = p_next_id}} {{>token_refusal | token = p_next_claim_token}} END, 6, 0, ': next'))}}
      {{>unit_begin | own = v_own}}
      {{>finalize_settle | id = p_id | token = p_claim_token | outcome = v_outcome | provider_message_id = p_provider_message_id | error_code = p_error_code | error_message = p_error_message | delay = p_delay_seconds | to_status = v_to}}
    END;
  END IF;
  {{>start_one | id = p_next_id | token = p_next_claim_token | now = v_now | to_status = v_started}}
  {{>unit_end | own = v_own}}
  SELECT v_to IS NOT NULL AS affected, v_to AS status, v_started IS NOT NULL AS started;
END
