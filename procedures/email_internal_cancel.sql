-- Internal: the cancel of one row, shared by email_cancel (a service, by its notification id) and
-- email_cancel_email (an operator or the console, by row id). Checks who and why, then ends the row
-- Failed 'Cancelled' through email_internal_end_unsent when it was never handed to SES, in one unit
-- of work. p_procedure names the public procedure in refusals; p_id NULL or unknown: nothing changes.
-- A service's cancel (email_cancel) tells it nothing of the suppression list (issue 37): its row that
-- ended Failed 'Suppressed' (never handed to SES) is cancelled as the due row it was would have been:
-- last_error_code becomes 'Cancelled' (so no redrive after the address leaves the list ever sends what
-- its sender cancelled), the message keeps the suppression text after the cancel's, the audit gets a
-- Failed -> Failed event naming who and why, and the answer is 1 from the status it was failed from.
-- Result: affected (1 cancelled, else 0), attempt_id (NULL: no such row), from_status.
CREATE PROCEDURE email_internal_cancel(
  IN p_procedure VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_id BIGINT UNSIGNED,
  IN p_cancelled_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_status VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_code VARCHAR(64) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_message TEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_was VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_check_name(p_procedure, 'cancelled_by', p_cancelled_by, 191);
  CALL email_internal_check_name(p_procedure, 'reason', p_reason, 2000);
  CALL email_internal_begin(v_own);
  BEGIN
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_id = NULL;
    SELECT id INTO v_id FROM email_delivery_attempts WHERE id = p_id;
  END;
  IF v_id IS NOT NULL THEN
    CALL email_internal_end_unsent(v_id, v_now, 'Cancelled', CONCAT('cancelled: ', p_reason), p_cancelled_by, 0, v_from);
  END IF;
  IF v_id IS NOT NULL AND v_from IS NULL AND p_procedure = 'email_cancel' THEN
    BEGIN
      DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
      -- A plain read first: a row that will not change is not locked (a statement that changes
      -- nothing holds no lock after it returns).
      SELECT last_error_code INTO v_code FROM email_delivery_attempts FORCE INDEX (PRIMARY) WHERE id = v_id;
      IF v_code <=> 'Suppressed' THEN
        SET v_code = NULL;
        SELECT status, last_error_code, last_error_message INTO v_status, v_code, v_message
          FROM email_delivery_attempts FORCE INDEX (PRIMARY)
         WHERE id = v_id
           FOR UPDATE;
        IF v_status <=> 'Failed' AND v_code <=> 'Suppressed' THEN
          SELECT from_status INTO v_was
            FROM email_delivery_events FORCE INDEX (ix_email_delivery_events_attempt)
           WHERE attempt_id = v_id AND to_status = 'Failed'
           ORDER BY id DESC
           LIMIT 1;
          UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
             SET last_error_code = 'Cancelled',
                 last_error_message = LEFT(CONCAT('cancelled: ', p_reason, '; before that ', COALESCE(v_message, 'suppressed')), 8000),
                 row_version = row_version + 1,
                 updated_at = v_now
           WHERE id = v_id
             AND status = 'Failed'
             AND last_error_code = 'Suppressed';
          IF ROW_COUNT() = 1 THEN
            -- Retention may have deleted the suppression's event: a row is enqueued Pending.
            SET v_from = IF(v_was IN ('Pending', 'Retrying'), v_was, 'Pending');
            CALL email_internal_record_event(v_id, v_now, 'Failed', 'Failed', NULL, p_cancelled_by,
                                             CONCAT('cancelled: ', p_reason));
          END IF;
        END IF;
      END IF;
    END;
  END IF;
  CALL email_internal_end(v_own);
  SELECT IF(v_from IS NULL, 0, 1) AS affected, v_id AS attempt_id, v_from AS from_status;
END
