-- Refuse the call when {{refusal}} (a CASE of *_refusal branches) is not NULL. A refusal is spelled
-- errno then the message's rest, '45001: id must be ...', and {{where}} names the public procedure
-- in front of it, so a caller reads 'email_finalize_sent: id must be ...'. Callers refuse before their
-- unit of work opens, so nothing has been written. The test comes first and alone: the generator
-- folds it to the refusal's conditions (sql_fold), so a call that breaks no rule builds no message.
IF {{refusal}} IS NOT NULL THEN
  BEGIN
    DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
      {{refusal}};
    DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CONCAT({{where}}, SUBSTRING(v_refusal, 6));
    IF LEFT(v_refusal, 5) = '45007' THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_message;
    ELSEIF LEFT(v_refusal, 5) = '45010' THEN
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_message;
    END IF;
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END;
END IF;
