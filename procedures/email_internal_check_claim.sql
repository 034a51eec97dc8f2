-- Internal: the argument rules of every call that names a claimed row (id and claim token), for the
-- procedures that CALL it. p_where names the public procedure in the error, so a caller reads
-- 'email_claimed_bodies: ...'.
CREATE PROCEDURE email_internal_check_claim(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  IF ((p_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) THEN
    BEGIN
      DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
        CASE WHEN (p_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer' WHEN (CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters' END;
      -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
      -- expression): one variable, as every variable is paid for on every call.
      CASE LEFT(v_refusal, 5)
        WHEN '45007' THEN
          SET v_refusal = CONCAT(p_where, SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
        WHEN '45010' THEN
          SET v_refusal = CONCAT(p_where, SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
        ELSE
          SET v_refusal = CONCAT(p_where, SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_refusal;
      END CASE;
    END;
  END IF;
END
