-- Refuse the call when {{refusal}} (a CASE of *_refusal branches) is not NULL. A refusal is spelled
-- errno then the message's rest, '45001: id must be ...', and {{where}} names the public procedure
-- in front of it, so a caller reads 'email_finalize_sent: id must be ...'. Callers refuse before their
-- unit of work opens, so nothing has been written. The test comes first and alone: the generator
-- folds it to the refusal's conditions (sql_fold), so a call that breaks no rule builds no message.
IF {{refusal}} IS NOT NULL THEN
  BEGIN
    DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
      {{refusal}};
    -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
    -- expression): one variable, as every variable is paid for on every call.
    CASE LEFT(v_refusal, 5)
      WHEN '45007' THEN
        SET v_refusal = CONCAT({{where}}, SUBSTRING(v_refusal, 6));
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
      WHEN '45010' THEN
        SET v_refusal = CONCAT({{where}}, SUBSTRING(v_refusal, 6));
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
      ELSE
        SET v_refusal = CONCAT({{where}}, SUBSTRING(v_refusal, 6));
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_refusal;
    END CASE;
  END;
END IF;
