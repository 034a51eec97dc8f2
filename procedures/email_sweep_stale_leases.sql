-- Settle up to p_limit Processing rows whose lease has passed: a started claim goes to UnknownOutcome
-- and its attempt counts (never back to a claimable status: the send may have happened); a
-- reservation whose send never started goes back to the status it was claimed from, attempt not
-- counted (it was never sent). Then end up to p_limit rows past their expires_at that were never
-- handed to SES Failed 'Expired'. Every batch claim does both first. Result: affected (leases
-- swept), expired (rows expired).
CREATE PROCEDURE email_sweep_stale_leases(
  IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_swept BIGINT DEFAULT 0;
  DECLARE v_expired BIGINT DEFAULT 0;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_sweep_stale_leases: limit must be 1 to 10000';
  END IF;
  CALL email_internal_sweep_stale_leases(p_limit, v_swept);
  CALL email_internal_expire_overdue(p_limit, 'expiry-sweep', v_expired);
  SELECT v_swept AS affected, v_expired AS expired;
END
