-- The start mark of one reservation (start_fence), inside the caller's unit of work: from now on it
-- may have been sent, and an expired lease makes it UnknownOutcome. {{to_status}} is 'Processing'
-- when the mark landed, NULL when the claim was no longer held (a cancel got there first), had started
-- already, or its lease was over: then do not send. No audit event for a start: the claim's event
-- stands, and a start costs one UPDATE on the send's path.
UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
   SET a.reserved_at = NULL
 WHERE a.id = {{id}}
   {{>start_fence | token = {{token}} | now = {{now}}}};
IF ROW_COUNT() = 1 THEN
  SET {{to_status}} = 'Processing';
ELSE
  {{>start_refused | id = {{id}} | now = {{now}} | scratch = {{to_status}}}}
  SET {{to_status}} = NULL;
END IF;
