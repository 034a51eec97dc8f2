-- How many sends a tenant's send rate schedule allows by {{now}}.
--   rate        the tenant's send_rate (not NULL)
--   rate_start  where its schedule stands (tenant_rate_start)
--   now         the claim's time
GREATEST(0, FLOOR(TIMESTAMPDIFF(MICROSECOND, {{rate_start}}, {{now}}) / 1000000 * {{rate}}))
