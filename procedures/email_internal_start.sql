-- Internal: the start mark. The reservation this claim holds (id, claim token, Processing,
-- reserved_at set, lease not yet over, expires_at not passed) becomes a started claim: from now on it
-- may have been sent, and an expired lease makes it UnknownOutcome. p_to_status is 'Processing' when
-- the mark landed, NULL when the claim was no longer held (a cancel got there first: email_cancel),
-- had started already, or its lease was over: then do not send. A reservation past its expires_at is
-- not started: it ends Failed 'Expired' here, audited, never sent.
-- No audit event for a start: the claim's event stands, and a start costs one UPDATE on the send's path.
CREATE PROCEDURE email_internal_start(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  OUT p_to_status VARCHAR(20) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET reserved_at = NULL
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing'
     AND reserved_at IS NOT NULL
     AND lease_expires_at > v_now
     AND (expires_at IS NULL OR expires_at > v_now);
  SET p_to_status = IF(ROW_COUNT() = 1, 'Processing', NULL);
  IF p_to_status IS NULL THEN
    CALL email_internal_begin(v_own);
    CALL email_internal_end_unsent(p_id, v_now, 'Expired', NULL, 'start-check', 1, v_from);
    CALL email_internal_end(v_own);
  END IF;
END
