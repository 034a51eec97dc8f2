-- Each tenant as operators and their dashboards see it (`status`, the console, the worker's
-- /metrics): what holds it, its due rows and the oldest one's due time, what its claims took in its
-- current 24 hours, and from SES's events over the last 24 hours (the per-tenant hourly counts) its
-- sends, bounce rate (permanent bounces per send) and complaint rate (complaints per send), NULL with
-- no send. Counts the due rows of each tenant on ..._tenant_due: its cost follows the backlog, not
-- the history. Result: one row per tenant: tenant, weight, paused_reason, guard_below_priority,
-- guard_reason, due_rows, oldest_due_at, claimed_24h, sends_24h, bounce_rate, complaint_rate,
-- database_now.
CREATE PROCEDURE email_tenant_stats()
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  SELECT t.name AS tenant, t.weight, t.paused_reason, t.guard_below_priority, t.guard_reason,
         (SELECT COUNT(*) FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_tenant_due)
           WHERE a.claim_tenant = t.id AND a.claim_due_at <= v_now) AS due_rows,
         (SELECT MIN(a.claim_due_at) FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_tenant_due)
           WHERE a.claim_tenant = t.id) AS oldest_due_at,
         IF(t.day_started_at > v_now - INTERVAL 1 DAY, t.day_count, 0) AS claimed_24h,
         COALESCE(h.sends, 0) AS sends_24h,
         IF(COALESCE(h.sends, 0) = 0, NULL, h.permanent_bounces / h.sends) AS bounce_rate,
         IF(COALESCE(h.sends, 0) = 0, NULL, h.complaints / h.sends) AS complaint_rate,
         v_now AS database_now
    FROM email_tenants t
    LEFT JOIN (SELECT tenant_id, SUM(sends) AS sends, SUM(permanent_bounces) AS permanent_bounces,
                      SUM(complaints) AS complaints
                 FROM email_tenant_event_hours
                WHERE hour_at >= DATE_FORMAT(v_now - INTERVAL 1 DAY, '%Y-%m-%d %H:00:00')
                GROUP BY tenant_id) h ON h.tenant_id = t.id
   ORDER BY t.name;
END
