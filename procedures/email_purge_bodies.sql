-- Retention: clear the bodies of Sent and Failed rows last changed more than older_than_days ago.
-- The row and its notification_id stay, so a late duplicate enqueue is still recognised.
-- UnknownOutcome rows keep their bodies: an operator may still requeue them. Result: affected.
CREATE PROCEDURE email_purge_bodies(
  IN p_older_than_days BIGINT,
  IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_cutoff DATETIME(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_done INT DEFAULT 0;
  DECLARE v_affected BIGINT DEFAULT 0;
  -- Only rows that still hold bodies, oldest id first: purged rows have left the index's NULL range,
  -- so every batch starts where the previous one stopped and a whole purge is linear in the table.
  DECLARE c_old CURSOR FOR
    SELECT id FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_unpurged)
     WHERE bodies_purged_at IS NULL AND status IN ('Sent', 'Failed') AND updated_at < v_cutoff
     ORDER BY bodies_purged_at, id
     LIMIT p_limit;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

  IF p_older_than_days IS NULL OR p_older_than_days < 0 OR p_older_than_days > 36500 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_purge_bodies: older_than_days must be 0 to 36500';
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'email_purge_bodies: limit must be 1 to 10000';
  END IF;
  SET v_cutoff = v_now - INTERVAL p_older_than_days DAY;

  OPEN c_old;
  purge_loop: LOOP
    FETCH c_old INTO v_id;
    IF v_done = 1 THEN
      LEAVE purge_loop;
    END IF;
    UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
       SET text_body = NULL,
           html_body = NULL,
           bodies_purged_at = v_now,
           row_version = row_version + 1
     WHERE id = v_id
       AND status IN ('Sent', 'Failed')
       AND bodies_purged_at IS NULL;
    SET v_affected = v_affected + ROW_COUNT();
  END LOOP;
  CLOSE c_old;
  SELECT v_affected AS affected;
END
