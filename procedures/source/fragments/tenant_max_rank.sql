-- The highest claim rank (9 - priority) at which a tenant's rows may be claimed: every rank, or only the
-- ranks at or above the reputation guard's priority while the guard holds the tenant.
--   tenant  the alias of its email_tenants row
IF({{tenant}}.guard_below_priority IS NULL, 9, 9 - {{tenant}}.guard_below_priority)
