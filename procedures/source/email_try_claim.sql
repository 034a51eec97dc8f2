-- Claim one row by id: one guarded UPDATE by primary key. Checks suppression as the batch claim does:
-- a row whose to_address is on the suppression list ends Failed ('Suppressed') instead of being
-- claimed; a cc, bcc or other to address suppressed since the enqueue is left out of message_options.
-- Holds a row as the batch claims do while its tenant is paused, its reputation guard holds the row's
-- priority, or its daily quota or send rate leaves no send now (affected 0); a claim of a row whose
-- tenant has a send rate or a daily quota moves its rate schedule and day's count on by one, as the
-- batch claims do, serialised with them on the schedule's clock. It takes no share of the pass.
-- Result: one row, affected (1 won, 0 someone else did, or it is not due, or it is not claimable at
-- all), then the claim row shape of email_claim_batch (id, notification_id, to_address, from_address,
-- subject, text_body, html_body, attempt_count, max_attempts, lease_expires_at, body_bytes,
-- message_options, attachment_bytes, tenant, ses_tenant_name, created_at) as claimed, bodies inline;
-- all NULL when affected is 0.
CREATE PROCEDURE email_try_claim(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_suppressed INT DEFAULT 0;
  DECLARE v_expired_from VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_tenant_allows INT DEFAULT 0;
  DECLARE v_tenant INT UNSIGNED DEFAULT NULL;
  DECLARE v_limited INT DEFAULT 0;
  DECLARE v_clock DOUBLE;
  {{>undo_on_error | own = v_own}}
  {{>refuse | where = 'email_try_claim' | refusal = CASE
    {{>id_refusal | id = p_id}}
    {{>claim_refusals | token = p_claim_token | claimed_by = p_claimed_by | lease = p_lease_seconds | more_refusals = }}
  END}}
  -- The row's tenant, by a consistent read that locks nothing (a shared lock on the tenant's row met
  -- the batch claims' updates of it in deadlocks): a pause committed before this call is seen; one
  -- committed meanwhile is as if it came just after this claim, as for a batch claim.
  -- A tenant with a send rate or a daily quota (v_limited) whose claimable row this read finds is
  -- checked again under the locks below; any other call takes none of them.
  SELECT COUNT(*), MAX(t.id), MAX(t.send_rate IS NOT NULL OR t.daily_quota IS NOT NULL)
    INTO v_tenant_allows, v_tenant, v_limited
    FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
         STRAIGHT_JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id
   WHERE a.id = p_id
     AND {{>claimable | now = v_now}}
     AND {{>tenant_allows | tenant = t | rank = a.claim_queue_rank | now = v_now}};
  {{>unit_begin | own = v_own}}
  IF v_limited = 1 THEN
    -- The batch claims' order: the schedule's clock, then the tenant's row. Two claims of one tenant
    -- never both take its last send; the tenant's row read afresh (a locking read) under the clock.
    SELECT virtual_time INTO v_clock FROM email_tenant_schedule WHERE id = 1 FOR UPDATE;
    SELECT COUNT(*) INTO v_tenant_allows
      FROM email_tenants t FORCE INDEX (PRIMARY)
     WHERE t.id = v_tenant
       AND {{>tenant_allows | tenant = t | rank = 0 | now = v_now}}
       FOR UPDATE;
  END IF;
  -- A row to a suppressed address ends Failed instead of being claimed (the claim then matches 0).
  CALL email_internal_fail_if_suppressed(p_id, v_now, p_claimed_by, v_suppressed);
  -- A row past its expires_at ends Failed ('Expired') instead of being claimed (the claim then matches 0).
  {{>end_unsent | id = p_id | now = v_now | code = 'Expired' | why = NULL | actor = p_claimed_by | expired_only = 1 | from_status = v_expired_from}}
  UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
     SET {{>claim_changes | from_status = a.status | token = p_claim_token | claimed_by = p_claimed_by | now = v_now | lease = p_lease_seconds | reserved_at = NULL}}
   WHERE a.id = p_id
     AND {{>claimable | now = v_now}}
     AND v_tenant_allows = 1;
  SET v_affected = ROW_COUNT();
  IF v_affected = 1 THEN
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT {{>claimed_event | id = a.id | now = v_now | from_status = a.claimed_from_status | token = p_claim_token | claimed_by = p_claimed_by}}
      FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
     WHERE a.id = p_id;
    CALL email_internal_drop_suppressed_row(p_id);
    IF v_limited = 1 THEN
      UPDATE email_tenants t FORCE INDEX (PRIMARY)
         SET {{>tenant_take | tenant = t | rate = t.send_rate | rate_start = {{>tenant_rate_start | tenant = t | now = v_now}} | day_start = {{>tenant_day_start | tenant = t | now = v_now}} | day_base = {{>tenant_day_base | tenant = t | now = v_now}} | got = 1}}
       WHERE t.id = v_tenant;
    END IF;
  END IF;
  {{>unit_end | own = v_own}}
  SELECT v_affected AS affected, a.id, a.notification_id, a.to_address, a.from_address, a.subject,
         a.text_body, a.html_body, a.attempt_count, a.max_attempts, a.lease_expires_at,
         IF(a.id IS NULL, NULL, {{>body_bytes}}) AS body_bytes,
         a.message_options, a.attachment_bytes, t.name AS tenant, t.ses_tenant_name, a.created_at
    FROM (SELECT 1 AS one) x
         LEFT JOIN email_delivery_attempts a FORCE INDEX (PRIMARY)
           ON v_affected = 1 AND a.id = p_id AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
         LEFT JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id;
END
