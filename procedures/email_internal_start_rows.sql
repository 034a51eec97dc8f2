-- Internal: email_internal_start's start mark for every 'Started' row of the session's working table
-- email_settle_rows at once (email_finalize_batch's set path): one UPDATE for the set, each row fenced by
-- its own claim token, Processing, reserved_at, a lease not yet over and an expires_at not passed,
-- exactly as email_internal_start; tests/contract/test_contract_finalize_batch.py holds the two to the
-- same rows. A start that does not land here goes through email_internal_start itself, which ends a
-- reservation past its expires_at Failed ('Expired'); that is rare, so it goes one row at a time.
-- Afterwards `landed` is 1 and `to_status` 'Processing' for every start that landed: send those rows.
CREATE PROCEDURE email_internal_start_rows()
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_id BIGINT;
  DECLARE v_token VARCHAR(64) CHARACTER SET utf8mb4;
  DECLARE v_to VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_done INT DEFAULT 0;
  DECLARE c_refused CURSOR FOR
    SELECT id, claim_token FROM email_settle_rows WHERE outcome = 'Started' AND landed = 0 ORDER BY seq;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  UPDATE email_settle_rows s
         STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = s.id
     SET a.reserved_at = NULL,
         s.landed = 1,
         s.to_status = 'Processing'
   WHERE s.outcome = 'Started'
     AND a.claim_token = s.claim_token COLLATE utf8mb4_bin
     AND a.status = 'Processing'
     AND a.reserved_at IS NOT NULL
     AND a.lease_expires_at > v_now
     AND (a.expires_at IS NULL OR a.expires_at > v_now);
  IF EXISTS (SELECT 1 FROM email_settle_rows WHERE outcome = 'Started' AND landed = 0) THEN
    OPEN c_refused;
    each_refused: LOOP
      FETCH c_refused INTO v_id, v_token;
      IF v_done = 1 THEN
        LEAVE each_refused;
      END IF;
      CALL email_internal_start(v_id, v_token, v_to);
    END LOOP;
    CLOSE c_refused;
  END IF;
END
