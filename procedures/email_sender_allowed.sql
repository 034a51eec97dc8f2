-- May p_account (a database user name; '' or NULL: every account) send as p_sender? The worker asks
-- this at start for its default sender, which must be allowed for every account. Result: allowed (0/1).
CREATE PROCEDURE email_sender_allowed(
  IN p_sender TEXT CHARACTER SET utf8mb4,
  IN p_account TEXT CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_allowed INT DEFAULT 0;
  CALL email_internal_sender_allowed(p_sender, COALESCE(p_account, ''), v_allowed);
  SELECT v_allowed AS allowed;
END
