-- Internal: the claim behind every batch claim (email_claim_batch, email_claim_batch_bounded,
-- email_reserve_batch; they differ only in p_max_inline_body_bytes and p_reserve, passed to
-- email_internal_claim_batch). Claims, then returns the rows this claim token now holds in the one
-- claim row shape (docs/procedures.md, "The claimed row"): bodies up to p_max_inline_body_bytes
-- together, else both NULL (load them with email_claimed_bodies), then body_bytes, message_options
-- and attachment_bytes, then the row's tenant and its SES tenant name, then created_at (added in
-- 0.2.0, at the end so a caller reading columns by position keeps working). email_try_claim returns
-- the same columns after its `affected`.
CREATE PROCEDURE email_internal_claim_rows(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_claimed_by TEXT CHARACTER SET utf8mb4,
  IN p_lease_seconds BIGINT,
  IN p_limit BIGINT,
  IN p_max_inline_body_bytes BIGINT,
  IN p_reserve TINYINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4;
  IF p_max_inline_body_bytes IS NULL OR p_max_inline_body_bytes < 0 THEN
    SET v_message = CONCAT(p_where, ': max_inline_body_bytes must be 0 or more');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_claim_batch(p_where, p_claim_token, p_claimed_by, p_lease_seconds, p_limit, p_reserve);
  SELECT a.id, a.notification_id, a.to_address, a.from_address, a.subject,
         IF(COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) <= p_max_inline_body_bytes,
            a.text_body, NULL) AS text_body,
         IF(COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) <= p_max_inline_body_bytes,
            a.html_body, NULL) AS html_body,
         a.attempt_count, a.max_attempts, a.lease_expires_at,
         COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0) AS body_bytes,
         a.message_options, a.attachment_bytes, t.name AS tenant, t.ses_tenant_name, a.created_at
    FROM email_claim_batch_rows c FORCE INDEX (ix_seq)
         STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
         LEFT JOIN email_tenants t FORCE INDEX (PRIMARY) ON t.id = a.tenant_id
   WHERE a.claim_token = p_claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
   -- the claim's own order: highest priority first, then the oldest due
   ORDER BY c.seq;
END
