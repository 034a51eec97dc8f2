-- Internal (not part of the public contract, no grant needed): the sweep shared by
-- email_sweep_stale_leases and every batch claim that finds one (source/fragments/claim_batch.sql): a started claim whose
-- lease passed goes to UnknownOutcome, an unstarted reservation back to where it was claimed from.
-- Returns no result set; the count goes to p_affected.
-- Shape: a non-locking read of candidate ids, then one guarded UPDATE per primary key. A single range
-- UPDATE on the lease index deadlocked with concurrent claims (docs/design.md section 5).
CREATE PROCEDURE email_internal_sweep_stale_leases(
  IN p_limit BIGINT,
  OUT p_affected BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_token VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_claimed_by VARCHAR(191) CHARACTER SET utf8mb4;
  DECLARE v_lease DATETIME(6);
  DECLARE v_reserved DATETIME(6);
  DECLARE v_done INT DEFAULT 0;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE c_expired CURSOR FOR
    SELECT id, claim_token, claimed_by, lease_expires_at, reserved_at
      FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_lease)
     WHERE {{>stale_lease | now = v_now}}
     ORDER BY lease_expires_at
     LIMIT p_limit;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

  SET p_affected = 0;
  OPEN c_expired;
  sweep_loop: LOOP
    FETCH c_expired INTO v_id, v_token, v_claimed_by, v_lease, v_reserved;
    IF v_done = 1 THEN
      LEAVE sweep_loop;
    END IF;
    -- A swept lease counts as an attempt: the provider call may have happened. The token read above
    -- fences the write, so the event names the claim that really expired. A reservation whose send
    -- never started was not sent: it goes back to where it was claimed from, attempt not counted
    -- (settle checks reserved_at again under the row lock; if a start landed meanwhile, nothing
    -- changes now and the next sweep finds a started claim).
    IF v_reserved IS NOT NULL THEN
      CALL email_internal_settle(v_id, v_token, 'Released', 0, NULL, NULL, NULL, v_now, 'lease-sweep',
        CONCAT('reservation of ', COALESCE(v_claimed_by, '?'), ' expired at ', DATE_FORMAT(v_lease, '%Y-%m-%d %H:%i:%s.%f'),
               ' before its send started'),
        v_to);
    ELSE
      CALL email_internal_settle(v_id, v_token, 'UnknownOutcome', 0, 'LeaseExpired',
        'lease expired before the worker finalized the send', NULL, v_now, 'lease-sweep',
        CONCAT('lease of ', COALESCE(v_claimed_by, '?'), ' expired at ', DATE_FORMAT(v_lease, '%Y-%m-%d %H:%i:%s.%f')),
        v_to);
    END IF;
    IF v_to IS NOT NULL THEN
      SET p_affected = p_affected + 1;
    END IF;
  END LOOP;
  CLOSE c_expired;
END
