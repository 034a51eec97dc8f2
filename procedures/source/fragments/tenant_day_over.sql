-- Whether a tenant's 24 hours of daily quota are over (or never started): its day starts again at
-- {{now}} with a count of 0. For the batch claim and the per-row path alike.
--   tenant  the alias of its email_tenants row
--   now     the claim's time
({{tenant}}.day_started_at IS NULL OR {{tenant}}.day_started_at <= {{now}} - INTERVAL 1 DAY)
