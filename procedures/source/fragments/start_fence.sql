-- The start mark's fence (AND conditions on email_delivery_attempts `a`, after its id): the
-- reservation this claim holds (claim token, Processing, reserved_at set), its lease not yet over and
-- its expires_at not passed.
AND a.claim_token = {{token}} COLLATE utf8mb4_bin
AND a.status = 'Processing'
AND a.reserved_at IS NOT NULL
AND a.lease_expires_at > {{now}}
AND (a.expires_at IS NULL OR a.expires_at > {{now}})
