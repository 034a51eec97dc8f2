-- What the per-row path (email_claimable_candidates, email_try_claim) asks of a row's tenant, as the
-- batch claim's share-out does: not paused, and the row at a rank the reputation guard leaves. A row
-- whose tenant has no row is never claimed (the caller joins or tests EXISTS on the tenant's row).
-- The per-row path takes no share of the tenant's rate, daily quota or pass.
--   tenant  the alias of the row's email_tenants row
--   rank    the row's claim_queue_rank
{{tenant}}.paused_reason IS NULL
AND {{rank}} <= {{>tenant_max_rank | tenant = {{tenant}}}}
