-- Internal: the start mark. The reservation this claim holds (id, claim token, Processing,
-- reserved_at set, lease not yet over) becomes a started claim: from now on it may have been sent,
-- and an expired lease makes it UnknownOutcome. p_to_status is 'Processing' when the mark landed,
-- NULL when the claim was no longer held, had started already, or its lease was over: then do not send.
-- No audit event: the claim's event stands, and a start costs one UPDATE on the send's path.
CREATE PROCEDURE email_internal_start(
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  OUT p_to_status VARCHAR(20) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
     SET reserved_at = NULL
   WHERE id = p_id
     AND claim_token = p_claim_token COLLATE utf8mb4_bin
     AND status = 'Processing'
     AND reserved_at IS NOT NULL
     AND lease_expires_at > UTC_TIMESTAMP(6);
  SET p_to_status = IF(ROW_COUNT() = 1, 'Processing', NULL);
END
