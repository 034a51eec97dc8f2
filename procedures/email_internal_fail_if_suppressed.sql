-- Internal: a due row (Pending or Retrying) whose recipient is on the suppression list ends Failed
-- with last_error_code 'Suppressed', never handed to SES, audited; no attempt is counted. Called by
-- email_enqueue (a new row) and email_try_claim (before the claim), inside their unit of work.
-- p_failed: 1 when it failed the row.
CREATE PROCEDURE email_internal_fail_if_suppressed(
  IN p_id BIGINT UNSIGNED,
  IN p_now DATETIME(6),
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  OUT p_failed INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_address VARCHAR(320) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_key VARCHAR(320) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_erased_key VARCHAR(72) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_new_erased_key VARCHAR(72) CHARACTER SET utf8mb4;
  DECLARE v_why VARCHAR(2000) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT 'Pending';
  -- Not on the list (or no such row) is the usual answer, not a condition for the caller.
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  SET p_failed = 0;
  SELECT to_address INTO v_address FROM email_delivery_attempts WHERE id = p_id;
  CALL email_internal_address_key(v_address, v_key);
  -- An erased address is on the list by its keyed hash only (email_erase_address), under any key held.
  CALL email_internal_erased_key(v_address, v_new_erased_key, v_erased_key);
  SELECT LEFT(CONCAT('not sent: ', v_address, ' is on the suppression list (', reason, ': ', detail, ')'), 2000)
    INTO v_why
    FROM email_suppressed_addresses
   WHERE address_key IN (v_key COLLATE utf8mb4_bin, v_erased_key COLLATE utf8mb4_bin)
   LIMIT 1;
  IF v_why IS NOT NULL THEN
    -- Two guarded UPDATEs by primary key, one per due status: the count says which one held.
    UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
       SET status = 'Failed', last_error_code = 'Suppressed', last_error_message = v_why,
           claimed_from_status = NULL, row_version = row_version + 1, updated_at = p_now
     WHERE id = p_id AND status = 'Pending';
    SET p_failed = ROW_COUNT();
    IF p_failed = 0 THEN
      SET v_from = 'Retrying';
      UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
         SET status = 'Failed', last_error_code = 'Suppressed', last_error_message = v_why,
             claimed_from_status = NULL, row_version = row_version + 1, updated_at = p_now
       WHERE id = p_id AND status = 'Retrying';
      SET p_failed = ROW_COUNT();
    END IF;
    IF p_failed = 1 THEN
      CALL email_internal_record_event(p_id, p_now, v_from, 'Failed', NULL, p_actor, v_why);
    END IF;
  END IF;
END
