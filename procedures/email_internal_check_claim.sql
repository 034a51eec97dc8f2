-- Internal: the argument rules of every call that names a claimed row (id and claim token), once.
-- p_where names the public procedure in the error, so a caller reads 'email_finalize_sent: ...'.
CREATE PROCEDURE email_internal_check_claim(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4;
  IF p_id IS NULL OR p_id < 1 THEN
    SET v_message = CONCAT(p_where, ': id must be a positive integer');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_check_token(p_where, p_claim_token);
END
