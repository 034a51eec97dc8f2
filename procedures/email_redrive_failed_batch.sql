-- Operator: email_redrive_failed for many rows, in keyset batches. Looks at up to `limit` (1 to 1,000)
-- Failed rows with an id above after_id (0 to start), in id order, and redrives each that entered
-- Failed (updated_at) at or after failed_since and before failed_until (NULL: no end), whose
-- last_error_code is error_code (NULL: any), under email_internal_redrive's rule (a row whose content
-- is gone is passed over). dry_run = 1 changes nothing and counts what it would redrive. One
-- transaction per call. Pass last_id as the next after_id; done when examined < limit. Result: affected (redriven, or would be), examined, last_id.
CREATE PROCEDURE email_redrive_failed_batch(
  IN p_failed_since DATETIME(6),
  IN p_failed_until DATETIME(6),
  IN p_error_code TEXT CHARACTER SET utf8mb4,
  IN p_after_id BIGINT,
  IN p_limit BIGINT,
  IN p_dry_run TINYINT,
  IN p_redriven_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_updated DATETIME(6);
  DECLARE v_code VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE v_one BIGINT DEFAULT 0;
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_examined BIGINT DEFAULT 0;
  DECLARE v_last BIGINT DEFAULT 0;
  DECLARE v_done INT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE c_rows CURSOR FOR
    SELECT id, updated_at, last_error_code FROM email_delivery_attempts
      FORCE INDEX (ix_email_delivery_attempts_status_id)
     WHERE status = 'Failed' AND id > p_after_id
     ORDER BY id
     LIMIT p_limit;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_failed_since IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_redrive_failed_batch: failed_since is required';
  END IF;
  IF p_failed_until IS NOT NULL AND p_failed_until <= p_failed_since THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_redrive_failed_batch: failed_until must be after failed_since';
  END IF;
  IF CHAR_LENGTH(p_error_code) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_redrive_failed_batch: error_code must be at most 191 characters';
  END IF;
  IF p_after_id IS NULL OR p_after_id < 0 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_redrive_failed_batch: after_id must be 0 or more';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_redrive_failed_batch: limit must be 1 to 1000';
  END IF;
  IF p_dry_run IS NULL OR p_dry_run NOT IN (0, 1) THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_redrive_failed_batch: dry_run must be 0 or 1';
  END IF;
  CALL email_internal_check_name('email_redrive_failed_batch', 'redriven_by', p_redriven_by, 191);
  CALL email_internal_check_name('email_redrive_failed_batch', 'reason', p_reason, 2000);
  SET v_last = p_after_id;
  CALL email_internal_begin(v_own);
  OPEN c_rows;
  read_loop: LOOP
    FETCH c_rows INTO v_id, v_updated, v_code;
    IF v_done = 1 THEN
      LEAVE read_loop;
    END IF;
    SET v_examined = v_examined + 1;
    SET v_last = v_id;
    IF v_updated >= p_failed_since AND (p_failed_until IS NULL OR v_updated < p_failed_until)
       AND (p_error_code IS NULL OR v_code = p_error_code) THEN
      CALL email_internal_redrive(v_id, v_now, p_redriven_by, p_reason, p_dry_run, 0, v_one);
      SET v_affected = v_affected + v_one;
    END IF;
  END LOOP;
  CLOSE c_rows;
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected, v_examined AS examined, v_last AS last_id;
END
