-- Internal: a row that was never handed to SES ends Failed with p_code ('Cancelled', 'Expired'),
-- never to be sent, audited with p_actor and p_why (NULL: the expiry's own text); no attempt is counted. It applies to a row that is
-- Pending or Retrying, or Processing as a reservation whose send has not started (reserved_at set):
-- then its claim is cleared, so the reservation's start mark (start_one, fenced by the
-- claim token, Processing and reserved_at) finds nothing and the worker does not send it. A started
-- claim, a terminal row or UnknownOutcome is left alone. The row lock taken first orders this against
-- a start or a claim that reached the row at the same moment: whichever came first wins, never both.
-- p_expired_only 1: only a row whose expires_at has passed by p_now (read again under the lock).
-- Runs inside the caller's unit of work. p_from_status: the status it left (NULL: nothing changed).
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
  -- The table's collation: compared with the status column below.
  DECLARE v_status VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci DEFAULT NULL;
  DECLARE v_reserved DATETIME(6) DEFAULT NULL;
  DECLARE v_token VARCHAR(64) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_expires DATETIME(6) DEFAULT NULL;
  DECLARE v_why TEXT CHARACTER SET utf8mb4;
  -- No such row is an answer (nothing changed), not a condition for the caller.
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  SET p_from_status = NULL;
  -- First a plain read, which locks nothing: a row that is being sent, or finished, is left without a
  -- lock, so a caller whose transaction stays open after a call that changed nothing holds up no
  -- worker's finalize (issue 37). Only a row that may change is locked and read again. (A caller
  -- whose snapshot is older than the row's start still locks it; the worker waits on such a lock for
  -- its short lock wait timeout only.)
  SELECT status, reserved_at INTO v_status, v_reserved
    FROM email_delivery_attempts FORCE INDEX (PRIMARY)
   WHERE id = p_id;
  IF v_status IN ('Pending', 'Retrying') OR (v_status = 'Processing' AND v_reserved IS NOT NULL) THEN
    SET v_status = NULL, v_reserved = NULL;
    SELECT status, reserved_at, claim_token, expires_at INTO v_status, v_reserved, v_token, v_expires
      FROM email_delivery_attempts FORCE INDEX (PRIMARY)
     WHERE id = p_id
       FOR UPDATE;
  END IF;
  IF (v_status IN ('Pending', 'Retrying') OR (v_status = 'Processing' AND v_reserved IS NOT NULL))
     AND (p_expired_only = 0 OR v_expires <= p_now) THEN
    SET v_why = COALESCE(p_why, CONCAT('expired: not sent by its expires_at ',
                                       DATE_FORMAT(v_expires, '%Y-%m-%d %H:%i:%s.%f'), ' UTC'));
    UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
       SET status = 'Failed',
           last_error_code = p_code,
           last_error_message = LEFT(v_why, 8000),
           claim_token = NULL,
           lease_expires_at = NULL,
           claimed_from_status = NULL,
           reserved_at = NULL,
           row_version = row_version + 1,
           updated_at = p_now
     WHERE id = p_id
       AND status = v_status;
    IF ROW_COUNT() = 1 THEN
      SET p_from_status = v_status;
      CALL email_internal_record_event(p_id, p_now, v_status, 'Failed', v_token, p_actor, v_why);
    END IF;
  END IF;
END
