-- The tenants that can take a slot of a batch claim, in the order of their pass (lowest first, then
-- id), on ix_email_tenants_pass (migration 0022): not paused, with room for a send in their daily
-- quota and send rate schedule, and with a claimable row due by {{now}}: its first row on
-- ..._tenant_queue is due, or else the first entry of its range of ..._tenant_due, its earliest due
-- time, is (one entry read each, whatever its backlog; the second only when the first is not due).
-- A derived table of their id, pass and top: their first row on ..._tenant_queue (their highest
-- priority, oldest due) when it is due, as its id * 16 + its rank, else NULL; at most {{limit}} of
-- them, read by the index in order and left as soon as that many are found: a walk, not a sort.
--   now    the claim's time
--   from   only tenants with a pass at or above it
--   more   a further condition on the tenant `t`
--   limit  the most tenants
(SELECT t.id, t.pass,
        (SELECT IF(q.claim_due_at <= {{now}}, q.id * 16 + q.claim_queue_rank, NULL)
           FROM email_delivery_attempts q FORCE INDEX (ix_email_delivery_attempts_tenant_queue)
          WHERE q.claim_tenant = t.id
          ORDER BY q.claim_queue_rank, q.claim_due_at, q.id LIMIT 1) AS top
   FROM email_tenants t FORCE INDEX (ix_email_tenants_pass)
  WHERE t.pass >= {{from}}
    AND {{>tenant_allows | tenant = t | rank = 0 | now = {{now}}}}
    AND {{more}}
 HAVING top IS NOT NULL
     OR (SELECT a.claim_due_at FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_tenant_due)
          WHERE a.claim_tenant = t.id ORDER BY a.claim_due_at LIMIT 1) <= {{now}}
  ORDER BY t.pass, t.id
  LIMIT {{limit}})
