-- A row past its expires_at by {{now}} that was never handed to SES (Pending, Retrying, or a
-- reservation whose send has not started; a row of email_delivery_attempts, on the expiry index): the
-- expiry sweep's work.
status IN ('Pending', 'Retrying', 'Processing')
AND expires_at <= {{now}}
AND (status <> 'Processing' OR reserved_at IS NOT NULL)
