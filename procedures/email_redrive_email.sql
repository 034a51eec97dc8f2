-- Operator: redrive one email by its outbox id (attempt id), whichever account enqueued it: the
-- console's redrive (its page and its bulk page) and `email-outbox redrive --id`, so two services'
-- emails with the same notification id are never mistaken for each other. The rule is
-- email_redrive_failed's (email_internal_redrive): a Failed row SES never accepted goes back to
-- Pending with a fresh attempt budget, audited with who and why; a row whose content is gone is
-- refused with 45009. Call it with autocommit on or inside your transaction. Result: affected (1
-- redriven, 0 not Failed or SES may have accepted it, or no such row), attempt_id (NULL: no such row).
CREATE PROCEDURE email_redrive_email(
  IN p_id BIGINT,
  IN p_redriven_by TEXT CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_id IS NULL OR p_id < 1 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_redrive_email: id must be a row id, 1 or more';
  END IF;
  CALL email_internal_check_name('email_redrive_email', 'redriven_by', p_redriven_by, 191);
  CALL email_internal_check_name('email_redrive_email', 'reason', p_reason, 2000);
  SELECT id INTO v_id FROM email_delivery_attempts WHERE id = p_id;
  IF v_id IS NOT NULL THEN
    CALL email_internal_begin(v_own);
    CALL email_internal_redrive(v_id, v_now, p_redriven_by, p_reason, 0, 1, v_affected);
    CALL email_internal_end(v_own);
  END IF;
  SELECT v_affected AS affected, v_id AS attempt_id;
END
