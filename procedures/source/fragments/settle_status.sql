-- The status the end of a claim writes (settle_changes' `outcome` below), read from the row of
-- email_delivery_attempts `a` as it is before the change; email_finalize_batch records it beside the
-- change in the same UPDATE.
CASE {{outcome}}
  WHEN 'Released' THEN COALESCE(a.claimed_from_status, 'Pending')
  WHEN 'Retrying' THEN IF(a.attempt_count + 1 >= a.max_attempts, 'Failed', 'Retrying')
  ELSE {{outcome}}
END
