-- The next tenants of a batch claim's walk, in the order of their pass (lowest first, then id), on
-- ix_email_tenants_pass (migration 0022): at most {{limit}}, read by the index in order and left as soon
-- as that many are read: a walk, not a sort. A derived table of their id, pass and pick. pick is NULL
-- for a tenant that cannot take a slot: paused, without room for a send in its daily quota or send rate
-- schedule, or without a claimable row due by {{now}}; those are returned too, so the claim can lift
-- their pass past this walk (docs/design.md, "Tenants"). Else its first row on ..._tenant_queue (its
-- highest priority, oldest due) as its id * 16 + its rank when that row is due, or 0 when the first
-- entry of its range of ..._tenant_due, its earliest due time, is (one entry read each, whatever its
-- backlog; the second only when the first is not due).
--   now    the claim's time
--   from   only tenants with a pass at or above it
--   more   a further condition on the tenant `t`
--   limit  the most tenants
(SELECT t.id, t.pass,
        IF({{>tenant_allows | tenant = t | rank = 0 | now = {{now}}}},
           COALESCE((SELECT IF(q.claim_due_at <= {{now}}, q.id * 16 + q.claim_queue_rank, NULL)
                       FROM email_delivery_attempts q FORCE INDEX (ix_email_delivery_attempts_tenant_queue)
                      WHERE q.claim_tenant = t.id
                      ORDER BY q.claim_queue_rank, q.claim_due_at, q.id LIMIT 1),
                    IF((SELECT a.claim_due_at
                          FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_tenant_due)
                         WHERE a.claim_tenant = t.id ORDER BY a.claim_due_at LIMIT 1) <= {{now}}, 0, NULL)),
           NULL) AS pick
   FROM email_tenants t FORCE INDEX (ix_email_tenants_pass)
  WHERE t.pass >= {{from}}
    AND {{more}}
  ORDER BY t.pass, t.id
  LIMIT {{limit}})
