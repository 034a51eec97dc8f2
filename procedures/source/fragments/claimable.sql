-- A claimable row of email_delivery_attempts `a`, once: due (claim_due_at is its due time while
-- Pending or Retrying, NULL otherwise) by {{now}}, with an attempt left.
a.claim_due_at <= {{now}}
AND a.attempt_count < a.max_attempts
