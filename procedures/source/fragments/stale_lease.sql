-- A claim whose lease is over by {{now}} (a row of email_delivery_attempts, on the lease index): the
-- lease sweep's work.
status = 'Processing' AND lease_expires_at <= {{now}}
