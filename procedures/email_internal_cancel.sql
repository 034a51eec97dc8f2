-- Internal: the cancel of one row, shared by email_cancel (a service, by its notification id) and
-- email_cancel_email (an operator or the console, by row id). Checks who and why, then ends the row
-- Failed 'Cancelled' through email_internal_end_unsent when it was never handed to SES, in one unit
-- of work. p_procedure names the public procedure in refusals; p_id NULL or unknown: nothing changes.
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
  CALL email_internal_end(v_own);
  SELECT IF(v_from IS NULL, 0, 1) AS affected, v_id AS attempt_id, v_from AS from_status;
END
