-- Internal: the one writer of email_allowed_senders_log, inside the change it records. p_by is the
-- name the operator gave; db_account is the server's word for the account that called.
CREATE PROCEDURE email_internal_log_sender_change(
  IN p_occurred_at DATETIME(6),
  IN p_action VARCHAR(10) CHARACTER SET utf8mb4,
  IN p_sender VARCHAR(320) CHARACTER SET utf8mb4,
  IN p_account VARCHAR(300) CHARACTER SET utf8mb4,
  IN p_by VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_reason VARCHAR(2000) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  INSERT INTO email_allowed_senders_log (occurred_at, action, sender, account, actor, db_account, reason)
  VALUES (p_occurred_at, p_action, p_sender, p_account, p_by, SESSION_USER(), p_reason);
END
