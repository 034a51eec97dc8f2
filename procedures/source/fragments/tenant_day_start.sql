-- When a tenant's current 24 hours started ({{now}} when they are over).
--   tenant  the alias of its email_tenants row
--   now     the claim's time
IF({{>tenant_day_over | tenant = {{tenant}} | now = {{now}}}}, {{now}}, {{tenant}}.day_started_at)
