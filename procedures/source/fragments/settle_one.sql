-- The end of one claim (settle_changes, fenced by settle_fence) and its audit event, inside the
-- caller's unit of work; {{to_status}} is the status written, NULL when the claim was no longer held
-- and nothing changed. {{actor}} and {{detail}} NULL: the claimant, and the outcome's standard detail.
-- Its arguments are checked by the caller first (finalize_refusals).
UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
   SET {{>settle_changes | outcome = {{outcome}} | delay = {{delay}} | error_code = {{error_code}} | provider_message_id = {{provider_message_id}} | expired_by = {{expired_by}} | now = {{now}}}},
       a.last_error_message = IF({{>writes_error | outcome = {{outcome}}}}, LEFT({{error_message}}, 8000), a.last_error_message)
 WHERE a.id = {{id}}
   {{>settle_fence | token = {{token}} | outcome = {{outcome}} | expired_by = {{expired_by}}}};
IF ROW_COUNT() = 1 THEN
  -- The audit event from the row just written (its status, its claimant), in one statement.
  INSERT INTO email_delivery_events
    (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
  SELECT a.id, {{now}}, 'Processing', a.status, {{token}}, COALESCE({{actor}}, a.claimed_by), SESSION_USER(),
         {{>settle_detail | detail = {{detail}} | outcome = {{outcome}} | provider_message_id = {{provider_message_id}} | error_code = {{error_code}} | error_message = {{error_message}} | delay = {{delay}} | to_status = a.status}}
    FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
   WHERE a.id = {{id}};
  -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
  -- from) write a status that depends on the row.
  IF {{outcome}} IN ('Sent', 'Failed', 'UnknownOutcome') THEN
    SET {{to_status}} = CASE {{outcome}} WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' ELSE 'UnknownOutcome' END;
  ELSE
    SELECT a.status INTO {{to_status}} FROM email_delivery_attempts a FORCE INDEX (PRIMARY) WHERE a.id = {{id}};
  END IF;
ELSE
  SET {{to_status}} = NULL;
END IF;
