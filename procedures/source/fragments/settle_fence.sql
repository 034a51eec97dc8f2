-- The fence of the end of a claim (AND conditions on email_delivery_attempts `a`, after its id): the
-- claim is still held (claim token, Processing); for the sweep (expired_by not NULL) its lease has
-- ended by then, and it releases only a reservation whose send never started, read again under the
-- row lock.
AND a.claim_token = {{token}} COLLATE utf8mb4_bin
AND a.status = 'Processing'
AND ({{expired_by}} IS NULL OR a.lease_expires_at <= {{expired_by}})
AND ({{expired_by}} IS NULL OR {{outcome}} <> 'Released' OR a.reserved_at IS NOT NULL)
