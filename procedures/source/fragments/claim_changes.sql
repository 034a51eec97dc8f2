-- The change that claims a row of email_delivery_attempts `a`, as an UPDATE's SET list: Processing
-- under this claim token and claimer, with a lease; {{reserved_at}} NULL: started, else a reservation
-- (its send not started). {{from_status}} is the status it was claimed from, read before `a.status`
-- is assigned.
a.claimed_from_status = {{from_status}},
a.status = 'Processing',
a.claim_token = {{token}},
a.claimed_by = {{claimed_by}},
a.claimed_at = {{now}},
a.lease_expires_at = {{now}} + INTERVAL {{lease}} SECOND,
a.reserved_at = {{reserved_at}},
a.row_version = a.row_version + 1,
a.updated_at = {{now}}
