-- The provider breaker as every replica and operator sees it (docs/design.md, "Provider outages"):
-- 'closed', 'open' or 'half_open'; a provider never seen down reads as closed. Reads only.
-- `since` is when the provider was seen down (or closed again; NULL if it never opened); `probe_at`,
-- while open, the time before which no probe goes; while half_open, the end of `probe_by`'s hold;
-- `probe_due` is 1 when a probe may be taken now.
-- Result: one row: provider, state, since, changed_at, changed_by, last_error_code, last_error_message, last_failure_at, probe_at, probe_by, probes, probe_due, database_time.
CREATE PROCEDURE email_breaker_state(
  IN p_provider VARCHAR(64) CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  SELECT p_provider AS provider,
         COALESCE(b.state, 'closed') AS state,
         b.since, b.changed_at, b.changed_by, b.last_error_code, b.last_error_message, b.last_failure_at,
         b.probe_at, b.probe_by, COALESCE(b.probes, 0) AS probes,
         IF(b.state IN ('open', 'half_open') AND b.probe_at <= v_now, 1, 0) AS probe_due,
         v_now AS database_time
    FROM (SELECT 1 AS one) AS k
    LEFT JOIN email_provider_breaker AS b ON b.provider = p_provider COLLATE utf8mb4_unicode_ci;
END
