-- Mark a reservation (email_reserve_batch) started, just before its send. Result: affected (1: send
-- it now; 0: do not send it: the claim is no longer held, was started already, or its lease is over).
CREATE PROCEDURE email_start_send(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    BEGIN
      DECLARE CONTINUE HANDLER FOR 1305 BEGIN END;
      IF v_own = 1 THEN
        ROLLBACK;
      ELSEIF v_own = 0 THEN
        ROLLBACK TO SAVEPOINT email_outbox_call;
      END IF;
    END;
    RESIGNAL;
  END;
  BEGIN
    DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CASE WHEN p_id IS NULL OR p_id < 1 THEN '45001: id must be a positive integer' WHEN p_claim_token IS NULL OR CHAR_LENGTH(p_claim_token) < 1 OR CHAR_LENGTH(p_claim_token) > 64 THEN '45007: claim_token must be 1 to 64 characters' END;
    IF v_refusal IS NOT NULL THEN
      BEGIN
        DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT CONCAT('email_start_send', SUBSTRING(v_refusal, 6));
        IF LEFT(v_refusal, 5) = '45007' THEN
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_message;
        ELSEIF LEFT(v_refusal, 5) = '45010' THEN
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_message;
        END IF;
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END;
    END IF;
  END;
  BEGIN
    DECLARE CONTINUE HANDLER FOR 1568 SET v_own = 0;
    SET v_own = 1;
    SET TRANSACTION READ WRITE;
  END;
  IF v_own = 1 THEN
    START TRANSACTION;
  ELSE
    SAVEPOINT email_outbox_call;
  END IF;
  UPDATE email_delivery_attempts a FORCE INDEX (PRIMARY)
     SET a.reserved_at = NULL
   WHERE a.id = p_id
     AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
     AND a.reserved_at IS NOT NULL
     AND a.lease_expires_at > v_now
     AND (a.expires_at IS NULL OR a.expires_at > v_now);
  IF ROW_COUNT() = 1 THEN
    SET v_to = 'Processing';
  ELSE
    SET v_to = NULL;
    BEGIN
      DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4;
      CALL email_internal_end_unsent(p_id, v_now, 'Expired', NULL, 'start-check', 1, v_from);
    END;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
