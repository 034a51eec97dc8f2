-- email_claim_batch_bounded's claim, as reservations: the same arguments, the same result columns, but each
-- row's send has not started yet. Mark it started (email_start_send, or a `started` item of
-- email_finalize_batch) just before sending it, never after. A reservation whose lease expires before
-- its start goes back to the status it was claimed from, attempt not counted (it was never sent); a
-- started claim goes to UnknownOutcome as before. A worker can so claim its next rows in a batch while
-- its sends are in flight, and a crash still leaves only the rows it had started ambiguous. Release
-- reservations you will not send (email_release_claim). Call it with autocommit on. Result: the claim
-- row shape, as email_claim_batch_bounded.
CREATE PROCEDURE email_reserve_batch(
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT,
  IN p_max_inline_body_bytes BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  {{>claim_batch | where = 'email_reserve_batch' | token = p_claim_token | claimed_by = p_claimed_by | lease = p_lease_seconds | limit = p_limit | max_inline = p_max_inline_body_bytes | reserve = 1}}
END
