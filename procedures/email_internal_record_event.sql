-- Internal: the one writer of email_delivery_events, called inside the unit of work of the transition
-- it records. p_actor is the name the caller gave (a worker id, an operator's --by); db_account is
-- the server's own word for the account that made the call (SESSION_USER(), not the definer).
CREATE PROCEDURE email_internal_record_event(
  IN p_attempt_id BIGINT UNSIGNED,
  IN p_occurred_at DATETIME(6),
  IN p_from_status VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_to_status VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_claim_token VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_detail TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  INSERT INTO email_delivery_events
    (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
  VALUES
    (p_attempt_id, p_occurred_at, p_from_status, p_to_status, p_claim_token, p_actor, SESSION_USER(), p_detail);
END
