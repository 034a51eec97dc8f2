-- Internal: the retention loop behind email_purge_bodies_after (and the deprecated email_purge_bodies). Clears the
-- bodies and attachments of up to p_limit Sent and Failed rows last changed more than p_older_than_days ago, with an
-- id above p_after_id, in id order. A range of the primary key from p_after_id: a caller that passes
-- the last id back never scans a row twice, so purging a whole table is linear in its size.
CREATE PROCEDURE email_internal_purge_bodies(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_older_than_days BIGINT,
  IN p_after_id BIGINT,
  IN p_limit BIGINT,
  OUT p_affected BIGINT,
  OUT p_last_id BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_cutoff DATETIME(6);
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_done INT DEFAULT 0;
  DECLARE v_message VARCHAR(200) CHARACTER SET utf8mb4;
  DECLARE c_old CURSOR FOR
    SELECT id FROM email_delivery_attempts FORCE INDEX (PRIMARY)
     WHERE id > p_after_id AND status IN ('Sent', 'Failed') AND updated_at < v_cutoff
       AND bodies_purged_at IS NULL
     ORDER BY id
     LIMIT p_limit;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;

  IF p_older_than_days IS NULL OR p_older_than_days < 0 OR p_older_than_days > 36500 THEN
    SET v_message = CONCAT(p_where, ': older_than_days must be 0 to 36500');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
    SET v_message = CONCAT(p_where, ': limit must be 1 to 10000');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  IF p_after_id IS NULL OR p_after_id < 0 THEN
    SET v_message = CONCAT(p_where, ': after_id must be 0 or a row id');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  SET v_cutoff = v_now - INTERVAL p_older_than_days DAY;
  SET p_affected = 0;
  SET p_last_id = p_after_id;

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
    IF ROW_COUNT() = 1 THEN
      SET p_affected = p_affected + 1;
      -- Attachments are bodies too; the row keeps attachment_bytes as a record of what was sent.
      DELETE FROM email_attachments WHERE attempt_id = v_id;
    END IF;
    SET p_last_id = v_id;
  END LOOP;
  CLOSE c_old;
END
