-- Internal: give feed positions (email_changes_feed) to committed events that have none yet, oldest
-- first: up to p_limit status changes (email_delivery_events) and p_limit provider events, in one
-- short transaction of its own at READ COMMITTED. The one row of email_changes_state, locked first,
-- makes sequencers take turns, so positions grow in the order events became visible. An event still
-- locked by an open transaction (its insert not yet committed, or a retention delete in flight) is
-- skipped, not waited for: it gets a later position once committed, so a reader that passed its id
-- still sees it. Inside the caller's own transaction nothing is done (p_more = 0): a sequencer there
-- would hold the state row until that transaction ends.
-- p_more: 1 when a batch was full (more events may be waiting for a position).
CREATE PROCEDURE email_internal_sequence_changes(
  IN p_limit INT,
  OUT p_more INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_own INT DEFAULT 1;
  DECLARE v_seq BIGINT UNSIGNED;
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_attempt BIGINT UNSIGNED;
  DECLARE v_n INT DEFAULT 0;
  DECLARE v_done INT DEFAULT 0;
  DECLARE v_source VARCHAR(8);
  DECLARE status_events CURSOR FOR
    SELECT id, attempt_id FROM email_delivery_events WHERE feed_seq IS NULL ORDER BY id LIMIT p_limit
    FOR UPDATE SKIP LOCKED;
  DECLARE provider_events CURSOR FOR
    SELECT id, attempt_id FROM email_provider_events WHERE feed_seq IS NULL ORDER BY id LIMIT p_limit
    FOR UPDATE SKIP LOCKED;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  -- 1568: a transaction is open (email_internal_begin tells the two cases apart the same way).
  DECLARE CONTINUE HANDLER FOR 1568 SET v_own = 0;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_own = 1 THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;

  SET p_more = 0;
  -- READ COMMITTED: the locking reads below take no gap locks, so enqueues never wait on a sequencer.
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  IF v_own = 1 THEN
    START TRANSACTION;
    -- The row is made again if it was lost, after the last position given, never below it.
    INSERT INTO email_changes_state (id, last_seq) SELECT 1, COALESCE(MAX(seq), 0) FROM email_changes_feed
      ON DUPLICATE KEY UPDATE last_seq = email_changes_state.last_seq;
    SELECT last_seq INTO v_seq FROM email_changes_state WHERE id = 1;
    SET v_source = 'status';
    WHILE v_source IS NOT NULL DO
      SET v_done = 0, v_n = 0;
      IF v_source = 'status' THEN
        OPEN status_events;
      ELSE
        OPEN provider_events;
      END IF;
      read_loop: LOOP
        IF v_source = 'status' THEN
          FETCH status_events INTO v_id, v_attempt;
        ELSE
          FETCH provider_events INTO v_id, v_attempt;
        END IF;
        IF v_done = 1 THEN
          LEAVE read_loop;
        END IF;
        SET v_seq = v_seq + 1, v_n = v_n + 1;
        IF v_source = 'status' THEN
          UPDATE email_delivery_events SET feed_seq = v_seq WHERE id = v_id;
        ELSE
          UPDATE email_provider_events SET feed_seq = v_seq WHERE id = v_id;
        END IF;
        -- The email's account: '' when retention already deleted the email (nobody's feed shows it).
        INSERT INTO email_changes_feed (seq, account, attempt_id, source, source_id)
        SELECT v_seq, COALESCE(MAX(a.account), ''), v_attempt, v_source, v_id
          FROM email_delivery_attempts a WHERE a.id = v_attempt;
      END LOOP;
      IF v_source = 'status' THEN
        CLOSE status_events;
        SET v_source = 'provider';
      ELSE
        CLOSE provider_events;
        SET v_source = NULL;
      END IF;
      IF v_n >= p_limit THEN
        SET p_more = 1;
      END IF;
    END WHILE;
    UPDATE email_changes_state SET last_seq = v_seq WHERE id = 1;
    COMMIT;
  END IF;
END
