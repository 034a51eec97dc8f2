-- The provider breaker as every replica and operator sees it (docs/design.md, "Provider outages"):
-- one row, `provider`, `state` ('closed', 'open' or 'half_open'), `since` (when the provider was seen
-- down, or when it closed again; NULL if it never opened), `changed_at`, `changed_by` (the replica),
-- `last_error_code`, `last_error_message`, `last_failure_at`, `probe_at` (open: no probe before it;
-- half_open: the probe of `probe_by` holds until it), `probe_by`, `probes` (since it last opened),
-- `probe_due` (1 when a probe may be taken now) and `database_time`. A provider never seen down reads
-- as closed. Reads only.
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
