-- Settle UnknownOutcome rows whose SES evidence was recorded before they became UnknownOutcome (an
-- event that arrived while the row was still Processing, then its lease expired): the same rule and
-- audit as email_record_provider_event, one row per unit of work. Acceptance evidence wins over a
-- Reject/RenderingFailure; the earliest event of the winning kind is named. Nothing is sent, and a
-- row with no evidence stays UnknownOutcome. Result: affected (rows settled). The events consumer
-- calls it every few seconds.
CREATE PROCEDURE email_resolve_unknown_from_evidence(
  IN p_limit BIGINT,
  IN p_resolved_by TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_seen BIGINT DEFAULT 0;
  DECLARE v_last BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_type VARCHAR(32) CHARACTER SET utf8mb4;
  DECLARE v_mid VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE v_at DATETIME(6);
  DECLARE v_note VARCHAR(500) CHARACTER SET utf8mb4;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_id = NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_resolve_unknown_from_evidence: limit must be 1 to 10000';
  END IF;
  CALL email_internal_check_name('email_resolve_unknown_from_evidence', 'resolved_by', p_resolved_by, 191);
  settle: LOOP
    SET v_id = NULL;
    -- UnknownOutcome rows through the status index (lease_expires_at is NULL for them: id order).
    SELECT a.id INTO v_id
      FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_lease)
     WHERE a.status = 'UnknownOutcome'
       AND a.id > v_last
       AND EXISTS (SELECT 1 FROM email_provider_events e WHERE e.attempt_id = a.id AND e.evidence = 1)
     ORDER BY a.id
     LIMIT 1;
    IF v_id IS NULL OR v_seen >= p_limit THEN
      LEAVE settle;
    END IF;
    SET v_last = v_id, v_seen = v_seen + 1;
    SELECT event_type, ses_message_id, event_at, match_note INTO v_type, v_mid, v_at, v_note
      FROM email_provider_events
     WHERE attempt_id = v_id AND evidence = 1
     ORDER BY event_type IN ('Reject', 'RenderingFailure'), event_at, id
     LIMIT 1;
    CALL email_internal_begin(v_own);
    CALL email_internal_resolve_from_event(v_id, v_now, v_type, v_mid, v_at,
      CONCAT_WS('; ', v_note, 'recorded before the row was UnknownOutcome'), p_resolved_by, v_to);
    CALL email_internal_end(v_own);
    IF v_to IS NOT NULL THEN
      SET v_affected = v_affected + 1;
    END IF;
  END LOOP;
  SELECT v_affected AS affected;
END
