-- The one end of a row that was never handed to SES: it ends Failed with {{code}} ('Cancelled',
-- 'Expired'), never to be sent, audited with {{actor}} and {{why}} (NULL: the expiry's own text); no
-- attempt is counted. It applies to a row that is Pending or Retrying, or Processing as a reservation
-- whose send has not started (reserved_at set): then its claim is cleared, so the reservation's start
-- mark (start_one, fenced by the claim token, Processing and reserved_at) finds nothing and the worker
-- does not send it. A started claim, a terminal row or UnknownOutcome is left alone. The row lock
-- taken first orders this against a start or a claim that reached the row at the same moment:
-- whichever came first wins, never both. Inside the caller's unit of work; no variable of its own
-- (it is included in the send path's procedures, where every variable is paid for on every call).
--   expired_only  1: only a row whose expires_at has passed by {{now}} (read again under the lock)
--   from_status   the caller's VARCHAR(20) variable, set to the status the row left (NULL: nothing
--                 changed)
BEGIN
  -- No such row is an answer (nothing changed), not a condition for the caller.
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  SET {{from_status}} = NULL;
  -- First a plain read, which locks nothing: a row that is being sent, or finished, is left without a
  -- lock, so a caller whose transaction stays open after a call that changed nothing holds up no
  -- worker's finalize (issue 37). Only a row that may change is locked and read again. (A caller
  -- whose snapshot is older than the row's start still locks it; the worker waits on such a lock for
  -- its short lock wait timeout only.)
  SELECT status INTO {{from_status}}
    FROM email_delivery_attempts FORCE INDEX (PRIMARY)
   WHERE id = {{id}}
     AND {{>never_sent}};
  IF {{from_status}} IS NOT NULL THEN
    SET {{from_status}} = NULL;
    SELECT status INTO {{from_status}}
      FROM email_delivery_attempts FORCE INDEX (PRIMARY)
     WHERE id = {{id}}
       AND {{>never_sent}}
       AND ({{expired_only}} = 0 OR expires_at <= {{now}})
       FOR UPDATE;
    IF {{from_status}} IS NOT NULL THEN
      -- The row is ours until commit: its event reads the claim token and the expiry first, then the
      -- change clears the claim.
      INSERT INTO email_delivery_events
        (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
      SELECT id, {{now}}, status, 'Failed', claim_token, {{actor}}, SESSION_USER(), {{>unsent_why | why = {{why}}}}
        FROM email_delivery_attempts FORCE INDEX (PRIMARY)
       WHERE id = {{id}};
      UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
         SET status = 'Failed',
             last_error_code = {{code}},
             last_error_message = LEFT({{>unsent_why | why = {{why}}}}, 8000),
             claim_token = NULL,
             lease_expires_at = NULL,
             claimed_from_status = NULL,
             reserved_at = NULL,
             row_version = row_version + 1,
             updated_at = {{now}}
       WHERE id = {{id}};
    END IF;
  END IF;
END;
