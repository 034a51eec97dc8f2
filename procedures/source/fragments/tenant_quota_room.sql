-- How many sends a tenant's daily quota leaves it now, at most {{limit}}.
--   tenant  the alias of its email_tenants row
--   now     the claim's time
--   limit   the most the caller can take
IF({{tenant}}.daily_quota IS NULL, {{limit}},
   GREATEST(0, {{tenant}}.daily_quota - {{>tenant_day_base | tenant = {{tenant}} | now = {{now}}}}))
