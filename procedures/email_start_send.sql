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
  IF ((p_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) THEN
    BEGIN
      DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
        CASE WHEN (p_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer' WHEN (CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters' END;
      -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
      -- expression): one variable, as every variable is paid for on every call.
      CASE LEFT(v_refusal, 5)
        WHEN '45007' THEN
          SET v_refusal = CONCAT('email_start_send', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
        WHEN '45010' THEN
          SET v_refusal = CONCAT('email_start_send', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
        ELSE
          SET v_refusal = CONCAT('email_start_send', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_refusal;
      END CASE;
    END;
  END IF;
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
    BEGIN
      -- No such row is an answer (nothing changed), not a condition for the caller.
      DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
      SET v_to = NULL;
      -- First a plain read, which locks nothing: a row that is being sent, or finished, is left without a
      -- lock, so a caller whose transaction stays open after a call that changed nothing holds up no
      -- worker's finalize (issue 37). Only a row that may change is locked and read again. (A caller
      -- whose snapshot is older than the row's start still locks it; the worker waits on such a lock for
      -- its short lock wait timeout only.)
      SELECT status INTO v_to
        FROM email_delivery_attempts FORCE INDEX (PRIMARY)
       WHERE id = p_id
         AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL));
      IF v_to IS NOT NULL THEN
        SET v_to = NULL;
        SELECT status INTO v_to
          FROM email_delivery_attempts FORCE INDEX (PRIMARY)
         WHERE id = p_id
           AND (status IN ('Pending', 'Retrying') OR (status = 'Processing' AND reserved_at IS NOT NULL))
           AND (expires_at <= v_now)
           FOR UPDATE;
        IF v_to IS NOT NULL THEN
          -- The row is ours until commit: its event reads the claim token and the expiry first, then the
          -- change clears the claim.
          INSERT INTO email_delivery_events
            (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
          SELECT id, v_now, status, 'Failed', claim_token, 'start-check', SESSION_USER(), CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC')
            FROM email_delivery_attempts FORCE INDEX (PRIMARY)
           WHERE id = p_id;
          UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
             SET status = 'Failed',
                 last_error_code = 'Expired',
                 last_error_message = LEFT(CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC'), 8000),
                 claim_token = NULL,
                 lease_expires_at = NULL,
                 claimed_from_status = NULL,
                 reserved_at = NULL,
                 row_version = row_version + 1,
                 updated_at = v_now
           WHERE id = p_id;
        END IF;
      END IF;
    END;
    SET v_to = NULL;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
