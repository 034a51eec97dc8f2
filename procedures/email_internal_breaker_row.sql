-- Internal: the breaker row of p_provider, created closed when missing (a database that never saw an
-- outage has none), then locked for the caller's change: p_state is its state now.
CREATE PROCEDURE email_internal_breaker_row(
  IN p_provider VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_now DATETIME(6),
  OUT p_state VARCHAR(20) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  INSERT IGNORE INTO email_provider_breaker (provider, state, since, changed_at, changed_by)
  VALUES (p_provider, 'closed', p_now, p_now, p_actor);
  SELECT state INTO p_state FROM email_provider_breaker WHERE provider = p_provider COLLATE utf8mb4_unicode_ci FOR UPDATE;
END
