-- Internal: the expiry sweep, run by every claim that finds one due (source/fragments/claim_batch.sql) and by
-- email_sweep_stale_leases, for rows no claim reaches in time (due later than their expiry, or
-- nobody claiming). Up to p_limit rows past their expires_at that were never handed to SES (Pending,
-- Retrying, or a reservation not started) end Failed 'Expired', each audited in its own unit of work
-- (email_internal_end_unsent reads the row again under its lock). A started send is never touched.
-- Shape as the lease sweep: a non-locking read of candidates on the expiry index, then one guarded
-- change per primary key. p_affected: how many it failed.
CREATE PROCEDURE email_internal_expire_overdue(
  IN p_limit BIGINT,
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  OUT p_affected BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  -- Generated from procedures/source/ (edit there, then run python -m email_outbox_devtools.procedure_source --write).
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_done INT DEFAULT 0;
  DECLARE c_expired CURSOR FOR
    SELECT id
      FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_expiry)
     WHERE status IN ('Pending', 'Retrying', 'Processing')
           AND expires_at <= v_now
           AND (status <> 'Processing' OR reserved_at IS NOT NULL)
     ORDER BY expires_at
     LIMIT p_limit;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;
  SET p_affected = 0;
  OPEN c_expired;
  expire_loop: LOOP
    FETCH c_expired INTO v_id;
    IF v_done = 1 THEN
      LEAVE expire_loop;
    END IF;
    CALL email_internal_begin(v_own);
    CALL email_internal_end_unsent(v_id, v_now, 'Expired', NULL, p_actor, 1, v_from);
    CALL email_internal_end(v_own);
    SET v_own = NULL;
    IF v_from IS NOT NULL THEN
      SET p_affected = p_affected + 1;
    END IF;
  END LOOP;
  CLOSE c_expired;
END
