-- A tenant's limits move on by {{got}} sends given: its rate schedule by got/rate, its day's count.
-- The day's count before its start: in a single-table UPDATE a later assignment reads the columns
-- the earlier ones set, and the count's base reads day_started_at.
--   tenant      the alias of its email_tenants row (the one updated)
--   rate        its send_rate as the claim read it
--   rate_start  where its schedule stood (tenant_rate_start)
--   day_start   when its day started (tenant_day_start)
--   day_base    its day's count before this claim (tenant_day_base)
--   got         the sends given
{{tenant}}.rate_next_at = IF({{rate}} IS NULL, {{tenant}}.rate_next_at,
                            {{rate_start}} + INTERVAL ROUND({{got}} / {{rate}} * 1000000) MICROSECOND),
{{tenant}}.day_count = {{day_base}} + {{got}},
{{tenant}}.day_started_at = {{day_start}}
