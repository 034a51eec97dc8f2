-- Internal: the `trace_context` member of email_enqueue_message, the W3C Trace Context of the code that
-- enqueued (https://www.w3.org/TR/trace-context/): an object of `traceparent` (required: version,
-- trace id, parent id and flags as lowercase hex, 00-<32>-<16>-<2>) and `tracestate` (optional, at
-- most 512 printable ASCII characters). The worker makes it the parent of the first send attempt's
-- span and a link of the later ones. p_trace_context: the checked object rebuilt (NULL: none given).
CREATE PROCEDURE email_internal_check_trace_context(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_message LONGTEXT CHARACTER SET utf8mb4,
  OUT p_trace_context LONGTEXT CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  DECLARE v_value LONGTEXT CHARACTER SET utf8mb4 DEFAULT JSON_EXTRACT(p_message, '$.trace_context');
  DECLARE v_parent LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_state LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;
  SET p_trace_context = NULL;
  IF v_value IS NOT NULL AND JSON_TYPE(v_value) <> 'NULL' THEN
    IF JSON_TYPE(v_value) <> 'OBJECT' OR JSON_LENGTH(JSON_REMOVE(v_value, '$.traceparent', '$.tracestate')) > 0
       OR JSON_LENGTH(v_value) <> JSON_LENGTH(JSON_KEYS(v_value)) THEN
      SET v_message = CONCAT(p_where, ': trace_context must be an object of traceparent and tracestate (W3C Trace Context)');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
    END IF;
    CALL email_internal_json_text(p_where, v_value, '$.traceparent', 'trace_context.traceparent', v_parent);
    IF v_parent IS NULL OR NOT v_parent COLLATE utf8mb4_bin REGEXP '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' THEN
      SET v_message = CONCAT(p_where, ': trace_context.traceparent must be a W3C traceparent: 00-<32 hex>-<16 hex>-<2 hex>, lowercase');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
    END IF;
    CALL email_internal_json_text(p_where, v_value, '$.tracestate', 'trace_context.tracestate', v_state);
    IF v_state IS NOT NULL AND (CHAR_LENGTH(v_state) > 512 OR NOT v_state COLLATE utf8mb4_bin REGEXP '^[ -~]*$') THEN
      SET v_message = CONCAT(p_where, ': trace_context.tracestate must be at most 512 printable ASCII characters');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
    END IF;
    SET p_trace_context = IF(v_state IS NULL, JSON_OBJECT('traceparent', v_parent),
                             JSON_OBJECT('traceparent', v_parent, 'tracestate', v_state));
  END IF;
END
