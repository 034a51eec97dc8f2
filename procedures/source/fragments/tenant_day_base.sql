-- The sends a tenant has been given in its current 24 hours (0 when they are over).
--   tenant  the alias of its email_tenants row
--   now     the claim's time
IF({{>tenant_day_over | tenant = {{tenant}} | now = {{now}}}}, 0, {{tenant}}.day_count)
