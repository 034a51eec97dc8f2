-- Internal: the end of a row that was never handed to SES (procedures/source/fragments/end_unsent.sql),
-- for the callers that are not generated from procedures/source/ (the cancel) and the sweeps that
-- CALL it per row. Runs inside the caller's unit of work. p_expired_only 1: only a row whose
-- expires_at has passed by p_now. p_from_status: the status it left (NULL: nothing changed).
CREATE PROCEDURE email_internal_end_unsent(
  IN p_id BIGINT UNSIGNED,
  IN p_now DATETIME(6),
  IN p_code VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_why TEXT CHARACTER SET utf8mb4,
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_expired_only TINYINT,
  OUT p_from_status VARCHAR(20) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  BEGIN
    -- No such row is an answer (nothing changed), not a condition for the caller.
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SET p_from_status = NULL;
    -- First a plain read, which locks nothing: a row that is being sent, or finished, is left without a
    -- lock, so a caller whose transaction stays open after a call that changed nothing holds up no
    -- worker's finalize (issue 37). Only a row that may change is locked and read again. (A caller
    -- whose snapshot is older than the row's start still locks it; the worker waits on such a lock for
    -- its short lock wait timeout only.)
    SELECT status INTO p_from_status
      FROM email_delivery_attempts FORCE INDEX (PRIMARY)
     WHERE id = p_id
       AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL));
    IF p_from_status IS NOT NULL THEN
      SET p_from_status = NULL;
      SELECT status INTO p_from_status
        FROM email_delivery_attempts FORCE INDEX (PRIMARY)
       WHERE id = p_id
         AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL))
         AND (p_expired_only = 0 OR expires_at <= p_now)
         FOR UPDATE;
      IF p_from_status IS NOT NULL THEN
        -- The row is ours until commit: its event reads the claim token and the expiry first, then the
        -- change clears the claim.
        INSERT INTO email_delivery_events
          (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
        SELECT id, p_now, status, 'Failed', claim_token, p_actor, SESSION_USER(), COALESCE(p_why, CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC'))
          FROM email_delivery_attempts FORCE INDEX (PRIMARY)
         WHERE id = p_id;
        UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
           SET status = 'Failed',
               last_error_code = p_code,
               last_error_message = LEFT(COALESCE(p_why, CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC')), 8000),
               claim_token = NULL,
               lease_expires_at = NULL,
               claimed_from_status = NULL,
               reserved_at = NULL,
               row_version = row_version + 1,
               updated_at = p_now
         WHERE id = p_id;
      END IF;
    END IF;
  END;
END
