-- Where a tenant's send rate schedule stands: its next send's time, but never further back than one
-- second's burst (or one send's interval, when the rate is below 1/s); NULL without a send rate.
--   tenant  the alias of its email_tenants row
--   now     the claim's time
IF({{tenant}}.send_rate IS NULL, NULL,
   GREATEST(COALESCE({{tenant}}.rate_next_at, {{now}} - INTERVAL 1 DAY),
            {{now}} - INTERVAL ROUND(GREATEST(1, 1 / {{tenant}}.send_rate) * 1000000) MICROSECOND))
