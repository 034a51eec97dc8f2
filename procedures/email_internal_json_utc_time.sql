-- Internal: one optional time member of a JSON document (email_enqueue_message's send_after and
-- expires_at): ISO 8601 with an offset (or Z), returned in UTC. p_value is NULL when the member is
-- absent or JSON null; a string in another shape, or a time that does not exist, is refused, naming
-- p_field.
CREATE PROCEDURE email_internal_json_utc_time(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_doc LONGTEXT CHARACTER SET utf8mb4,
  IN p_path VARCHAR(300) CHARACTER SET utf8mb4,
  IN p_field VARCHAR(300) CHARACTER SET utf8mb4,
  OUT p_value DATETIME(6)
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_text LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_local LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_offset VARCHAR(6);
  DECLARE v_offset_minutes INT;
  DECLARE v_message VARCHAR(512) CHARACTER SET utf8mb4;
  SET p_value = NULL;
  CALL email_internal_json_text(p_where, p_doc, p_path, p_field, v_text);
  IF v_text IS NOT NULL THEN
    IF NOT v_text COLLATE utf8mb4_bin REGEXP
         '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$' THEN
      SET v_message = CONCAT(p_where, ': ', p_field,
        ' must be ISO 8601 with an offset, e.g. 2026-12-24T09:00:00+01:00 or ...Z');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
    END IF;
    SET v_offset = IF(RIGHT(v_text, 1) = 'Z', '+00:00', RIGHT(v_text, 6));
    -- Minutes east of UTC. Arithmetic, not CONVERT_TZ: MariaDB 10.11's CONVERT_TZ mixed up offsets
    -- that are not whole quarter hours, and refused real ones above +13:00.
    SET v_offset_minutes = IF(LEFT(v_offset, 1) = '-', -1, 1)
                           * (CAST(SUBSTRING(v_offset, 2, 2) AS SIGNED) * 60 + CAST(SUBSTRING(v_offset, 5, 2) AS SIGNED));
    SET v_local = LEFT(v_text, CHAR_LENGTH(v_text) - IF(RIGHT(v_text, 1) = 'Z', 1, 6));
    BEGIN
      -- An impossible date (2026-13-01) is a warning on one server and an error on another, and
      -- 2026-02-30 may even parse: it counts only if it formats back to what was written.
      DECLARE CONTINUE HANDLER FOR SQLEXCEPTION SET p_value = NULL;
      SET p_value = STR_TO_DATE(IF(LOCATE('.', v_local) > 0, v_local, CONCAT(v_local, '.0')),
                                '%Y-%m-%dT%H:%i:%s.%f');
      IF DATE_FORMAT(p_value, '%Y-%m-%dT%H:%i:%s') <> LEFT(v_local, 19)
         OR v_offset_minutes NOT BETWEEN -720 AND 840 OR CAST(SUBSTRING(v_offset, 5, 2) AS SIGNED) > 59 THEN
        SET p_value = NULL;
      END IF;
      SET p_value = p_value - INTERVAL v_offset_minutes MINUTE;
    END;
    IF p_value IS NULL THEN
      SET v_message = CONCAT(p_where, ': ', p_field, ' is not a real time');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
    END IF;
  END IF;
END
