-- A row of email_delivery_attempts that was never handed to SES and may still be: Pending, Retrying,
-- or a reservation whose send has not started (Processing with reserved_at set).
(status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL))
