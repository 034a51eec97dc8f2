-- Operator: put an address on the suppression list by hand. No email is handed to SES for it any more:
-- a later enqueue, or a claim of a row already waiting, ends Failed ('Suppressed'). Compared the way
-- mail systems do (the domain case-insensitively). Logged in email_suppressed_addresses_log with the
-- operator's name, the calling account and the reason. Result: affected (1 added, 0 already there).
CREATE PROCEDURE email_suppression_add(
  IN p_address TEXT CHARACTER SET utf8mb4,
  IN p_added_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_added INT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_address IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45003, MESSAGE_TEXT = 'email_suppression_add: address is required';
  END IF;
  CALL email_internal_check_text('email_suppression_add', 'address', p_address, 'address');
  CALL email_internal_check_name('email_suppression_add', 'added_by', p_added_by, 191);
  CALL email_internal_check_name('email_suppression_add', 'reason', p_reason, 2000);
  CALL email_internal_begin(v_own);
  CALL email_internal_suppress_address(v_now, p_address, 'operator', p_reason, NULL, NULL, NULL, p_added_by, v_added);
  CALL email_internal_end(v_own);
  SELECT v_added AS affected;
END
