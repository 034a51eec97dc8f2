-- Inside the batch claim's transaction (claim_batch), right after its locking reads: rows just
-- locked for the claim (email_claim_batch_rows) whose expires_at has passed end Failed ('Expired',
-- never handed to SES, no attempt counted), audited in one statement, and leave the id list, so the
-- claim neither takes nor returns them. Nearly always there is none: one join over the locked ids.
--   now    the claim's time
--   actor  who claims (the events' actor)

-- The events first: they read expires_at and the claimed-from status of rows still Pending or Retrying.
INSERT INTO email_delivery_events
  (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
SELECT c.id, {{now}}, c.from_status, 'Failed', NULL, {{actor}}, SESSION_USER(),
       CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(a.expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC')
  FROM email_claim_batch_rows c
       STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
 WHERE a.expires_at <= {{now}}
 ORDER BY c.id;
IF ROW_COUNT() > 0 THEN
  UPDATE email_claim_batch_rows c
         STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
     SET a.status = 'Failed',
         a.last_error_code = 'Expired',
         a.last_error_message = CONCAT('not sent: expired at ', DATE_FORMAT(a.expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC'),
         a.claimed_from_status = NULL,
         a.row_version = a.row_version + 1,
         a.updated_at = {{now}}
   WHERE a.expires_at <= {{now}}
     AND a.status IN ('Pending', 'Retrying');
  DELETE c FROM email_claim_batch_rows c
         STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
   WHERE a.expires_at <= {{now}};
END IF;
