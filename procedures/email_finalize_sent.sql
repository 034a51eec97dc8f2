-- SES accepted the message: Processing -> Sent, fenced by id and claim token, claim cleared.
-- Result: affected (0: the caller no longer holds the claim; never retry that as a write).
CREATE PROCEDURE email_finalize_sent(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_provider_message_id TEXT CHARACTER SET utf8mb4
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
  IF ((p_id >= 1) IS NOT TRUE) OR ((CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE) OR ((CHAR_LENGTH(p_provider_message_id) BETWEEN 1 AND 191) IS NOT TRUE) OR (NULL > 191) THEN
    BEGIN
      DECLARE v_refusal VARCHAR(255) CHARACTER SET utf8mb4 DEFAULT
        CASE
          WHEN (p_id >= 1) IS NOT TRUE THEN '45001: id must be a positive integer'
          WHEN (CHAR_LENGTH(p_claim_token) BETWEEN 1 AND 64) IS NOT TRUE THEN '45007: claim_token must be 1 to 64 characters'
          WHEN (CHAR_LENGTH(p_provider_message_id) BETWEEN 1 AND 191) IS NOT TRUE THEN
            '45001: provider_message_id must be 1 to 191 characters'
        END;
      -- The errno first, then the variable becomes the message (SIGNAL takes a variable, not an
      -- expression): one variable, as every variable is paid for on every call.
      CASE LEFT(v_refusal, 5)
        WHEN '45007' THEN
          SET v_refusal = CONCAT('email_finalize_sent', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45007, MESSAGE_TEXT = v_refusal;
        WHEN '45010' THEN
          SET v_refusal = CONCAT('email_finalize_sent', SUBSTRING(v_refusal, 6));
          SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45010, MESSAGE_TEXT = v_refusal;
        ELSE
          SET v_refusal = CONCAT('email_finalize_sent', SUBSTRING(v_refusal, 6));
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
     SET a.status = 'Sent',
         a.last_attempt_at = v_now,
         a.provider_message_id = p_provider_message_id,
         a.sent_at = v_now,
         a.attempt_count = a.attempt_count + 1,
         a.claim_token = NULL,
         a.lease_expires_at = NULL,
         a.claimed_from_status = NULL,
         a.reserved_at = NULL,
         a.row_version = a.row_version + 1,
         a.updated_at = v_now
   WHERE a.id = p_id
     AND a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing';
  IF ROW_COUNT() = 1 THEN
    -- The audit event from the row just written (its status, its claimant), in one statement.
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT a.id, v_now, 'Processing', a.status, p_claim_token, a.claimed_by, SESSION_USER(),
           CONCAT('provider_message_id=', p_provider_message_id)
      FROM email_delivery_attempts a FORCE INDEX (PRIMARY)
     WHERE a.id = p_id;
    -- Only a retry (Failed when it used the last attempt) and a release (back to where it was claimed
    -- from) write a status that depends on the row.
    SET v_to = 'Sent';
  ELSE
    SET v_to = NULL;
  END IF;
  IF v_own = 1 THEN
    COMMIT;
  END IF;
  SELECT IF(v_to IS NULL, 0, 1) AS affected;
END
