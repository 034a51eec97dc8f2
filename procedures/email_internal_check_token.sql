-- Internal: the claim token's argument rule, once: 1 to 64 characters, else 45007 (invalid_claim).
-- Used by the claim that mints it (email_internal_claim_batch) and, through email_internal_check_claim,
-- by every call that shows it.
CREATE PROCEDURE email_internal_check_token(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4;
  IF p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN
    SET v_message = CONCAT(p_where, ': claim_token must be 1 to 64 characters');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_message;
  END IF;
END
