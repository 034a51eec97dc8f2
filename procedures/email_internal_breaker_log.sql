-- Internal: the one writer of email_provider_breaker_log, inside the unit of work of the breaker
-- change it records. db_account is SESSION_USER(), as in email_delivery_events.
CREATE PROCEDURE email_internal_breaker_log(
  IN p_provider VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_occurred_at DATETIME(6),
  IN p_from_state VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_to_state VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_detail TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  INSERT INTO email_provider_breaker_log (provider, occurred_at, from_state, to_state, actor, db_account, detail)
  VALUES (p_provider, p_occurred_at, p_from_state, p_to_state, p_actor, SESSION_USER(), p_detail);
END
