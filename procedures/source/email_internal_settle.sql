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
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_own INT DEFAULT NULL;
  {{>undo_on_error | own = v_own}}
  {{>unit_begin | own = v_own}}
  {{>settle_one | id = p_id | token = p_claim_token | outcome = p_outcome | delay = p_delay_seconds | error_code = p_error_code | error_message = p_error_message | provider_message_id = p_provider_message_id | expired_by = p_expired_by | actor = p_actor | detail = p_detail | now = v_now | to_status = p_to_status}}
  {{>unit_end | own = v_own}}
END
