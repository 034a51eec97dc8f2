-- What the per-row path (email_claimable_candidates, email_try_claim) asks of a row's tenant, as the
-- batch claim's share-out does: not paused, the row at a rank the reputation guard leaves, and room for
-- one more send in its daily quota and its send rate schedule. A row whose tenant has no row is never
-- claimed (the caller joins or tests EXISTS on the tenant's row).
--   tenant  the alias of the row's email_tenants row
--   rank    the row's claim_queue_rank
--   now     the claim's time
{{tenant}}.paused_reason IS NULL
AND {{rank}} <= {{>tenant_max_rank | tenant = {{tenant}}}}
AND {{>tenant_quota_room | tenant = {{tenant}} | now = {{now}} | limit = 1}} >= 1
AND ({{tenant}}.send_rate IS NULL
     OR {{>tenant_rate_room | rate = {{tenant}}.send_rate | rate_start = {{>tenant_rate_start | tenant = {{tenant}} | now = {{now}}}} | now = {{now}}}} >= 1)
