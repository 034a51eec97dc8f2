-- Worker: the outbox's own reputation guard, from SES's events (the per-tenant hourly counts
-- email_record_provider_event keeps): a tenant with at least p_min_sends Send events in the last 24
-- hours (and since its guard was last lifted), whose complaint rate (complaints per send) reached
-- p_complaint_rate or whose bounce rate (permanent bounces per send) reached p_bounce_rate, has its
-- sends below priority p_below_priority held (its rows wait, no attempt used) until an operator's
-- email_tenant_resume. Logged once, when set. Result: one row per tenant guarded by this call: tenant,
-- sends, complaint_rate, bounce_rate, reason.
CREATE PROCEDURE email_tenant_guard(
  IN p_checked_by TEXT CHARACTER SET utf8mb4,
  IN p_min_sends BIGINT,
  IN p_complaint_rate DOUBLE,
  IN p_bounce_rate DOUBLE,
  IN p_below_priority BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    RESIGNAL;
  END;
  IF p_min_sends IS NULL OR p_min_sends < 1 OR p_complaint_rate IS NULL OR p_complaint_rate <= 0
     OR p_bounce_rate IS NULL OR p_bounce_rate <= 0 OR p_below_priority IS NULL
     OR p_below_priority NOT BETWEEN 1 AND 9 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001,
      MESSAGE_TEXT = 'email_tenant_guard: min_sends must be 1 or more, the rates above 0, below_priority 1 to 9';
  END IF;
  CALL email_internal_check_name('email_tenant_guard', 'checked_by', p_checked_by, 191);
  CREATE TEMPORARY TABLE IF NOT EXISTS email_tenant_guarded (
    tenant_id INT UNSIGNED NOT NULL PRIMARY KEY,
    sends BIGINT NOT NULL,
    complaint_rate DOUBLE NOT NULL,
    bounce_rate DOUBLE NOT NULL
  ) ENGINE = MEMORY;
  DELETE FROM email_tenant_guarded;
  START TRANSACTION;
  INSERT INTO email_tenant_guarded (tenant_id, sends, complaint_rate, bounce_rate)
  SELECT t.id, SUM(h.sends), SUM(h.complaints) / SUM(h.sends), SUM(h.permanent_bounces) / SUM(h.sends)
    FROM email_tenants t
    JOIN email_tenant_event_hours h
      ON h.tenant_id = t.id
     AND h.hour_at >= DATE_FORMAT(v_now - INTERVAL 1 DAY, '%Y-%m-%d %H:00:00')
     AND h.hour_at >= DATE_FORMAT(COALESCE(t.guard_lifted_at, '2000-01-01'), '%Y-%m-%d %H:00:00')
   WHERE t.guard_below_priority IS NULL
   GROUP BY t.id
  HAVING SUM(h.sends) >= p_min_sends
     AND (SUM(h.complaints) / SUM(h.sends) >= p_complaint_rate
          OR SUM(h.permanent_bounces) / SUM(h.sends) >= p_bounce_rate);
  UPDATE email_tenant_guarded g STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = g.tenant_id
     SET t.guard_below_priority = p_below_priority, t.guard_at = v_now,
         t.guard_reason = LEFT(CONCAT_WS(', ',
           IF(g.complaint_rate >= p_complaint_rate, CONCAT('complaint rate ', ROUND(g.complaint_rate * 100, 3), '%'), NULL),
           IF(g.bounce_rate >= p_bounce_rate, CONCAT('bounce rate ', ROUND(g.bounce_rate * 100, 2), '%'), NULL),
           CONCAT('over ', g.sends, ' sends in 24 h')), 200),
         t.updated_at = v_now, t.row_version = t.row_version + 1
   WHERE t.guard_below_priority IS NULL;
  -- A replica running the guard at the same moment set it first: this call then says nothing.
  DELETE g FROM email_tenant_guarded g STRAIGHT_JOIN email_tenants t ON t.id = g.tenant_id
   WHERE t.guard_at IS NULL OR t.guard_at <> v_now;
  INSERT INTO email_tenants_log (occurred_at, action, name, detail, actor, db_account, reason)
  SELECT v_now, 'guard', t.name, CONCAT('sends below priority ', p_below_priority, ' held: ', t.guard_reason),
         p_checked_by, SESSION_USER(), NULL
    FROM email_tenant_guarded g STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = g.tenant_id;
  COMMIT;
  SELECT t.name AS tenant, g.sends, g.complaint_rate, g.bounce_rate, t.guard_reason AS reason
    FROM email_tenant_guarded g STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = g.tenant_id
   ORDER BY t.name;
END
