-- Enqueue one email, idempotently on notification_id, inside the caller's own transaction.
-- Never starts, commits or rolls back: a duplicate leaves the caller's transaction and its earlier
-- writes intact. Result: affected (1 new, 0 duplicate), attempt_id (the existing row's on a duplicate).
-- The rules and the insert are email_internal_enqueue's, shared with email_enqueue_message.
CREATE PROCEDURE email_enqueue(
  IN p_notification_id TEXT CHARACTER SET utf8mb4,
  IN p_to_address TEXT CHARACTER SET utf8mb4,
  IN p_from_address TEXT CHARACTER SET utf8mb4,
  IN p_subject TEXT CHARACTER SET utf8mb4,
  IN p_text_body LONGTEXT CHARACTER SET utf8mb4,
  IN p_html_body LONGTEXT CHARACTER SET utf8mb4,
  IN p_max_attempts BIGINT,
  IN p_send_after DATETIME(6)
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_affected INT DEFAULT 0;
  DECLARE v_attempt_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_own INT DEFAULT NULL;
  -- Every error (deadlock included) undoes this call's writes, leaves the caller's earlier writes
  -- alone, and reaches the caller.
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  CALL email_internal_begin(v_own);
  CALL email_internal_enqueue('email_enqueue', p_notification_id, p_to_address, p_from_address, p_subject,
                              p_text_body, p_html_body, p_max_attempts, p_send_after, 0, NULL, 0,
                              NULL, NULL, NULL, v_affected, v_attempt_id);
  CALL email_internal_end(v_own);
  SELECT v_affected AS affected, v_attempt_id AS attempt_id;
END
