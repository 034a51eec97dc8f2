-- Internal (not part of the public contract, no grant needed): the sweep shared by
-- email_sweep_stale_leases and email_claim_batch. Returns no result set; the count goes to p_affected.
-- Shape: a non-locking read of candidate ids, then one guarded UPDATE per primary key. A single range
-- UPDATE on the lease index deadlocked with concurrent claims (DESIGN.md section 5).
CREATE PROCEDURE email_internal_sweep_stale_leases(
  IN p_limit BIGINT,
  OUT p_affected BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_done INT DEFAULT 0;
  DECLARE c_expired CURSOR FOR
    SELECT id FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_lease)
     WHERE status = 'Processing' AND lease_expires_at <= v_now
     ORDER BY lease_expires_at
     LIMIT p_limit;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

  SET p_affected = 0;
  OPEN c_expired;
  sweep_loop: LOOP
    FETCH c_expired INTO v_id;
    IF v_done = 1 THEN
      LEAVE sweep_loop;
    END IF;
    -- A swept lease counts as an attempt: the provider call may have happened.
    UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
       SET transition_detail = CONCAT('lease of ', COALESCE(claimed_by, '?'), ' expired at ',
                                      DATE_FORMAT(lease_expires_at, '%Y-%m-%d %H:%i:%s.%f')),
           status = 'UnknownOutcome',
           attempt_count = attempt_count + 1,
           last_attempt_at = claimed_at,
           last_error_code = 'LeaseExpired',
           last_error_message = 'lease expired before the worker finalized the send',
           claim_token = NULL,
           lease_expires_at = NULL,
           row_version = row_version + 1,
           updated_at = v_now,
           updated_by = 'lease-sweep'
     WHERE id = v_id
       AND status = 'Processing'
       AND lease_expires_at <= v_now;
    SET p_affected = p_affected + ROW_COUNT();
  END LOOP;
  CLOSE c_expired;
END
