-- Internal: the recipients of a message document (to, cc, bcc) that are on the suppression list are
-- taken out (at enqueue, and again at the claim for addresses suppressed since), and listed under
-- `suppressed_recipients`, so SES never sees them and
-- `show` says why they did not get it. If every recipient is suppressed the document is returned as it
-- was: email_internal_enqueue then ends the row Failed ('Suppressed') through its first recipient.
CREATE PROCEDURE email_internal_drop_suppressed(
  IN p_doc LONGTEXT CHARACTER SET utf8mb4,
  OUT p_out LONGTEXT CHARACTER SET utf8mb4,
  OUT p_first_address LONGTEXT CHARACTER SET utf8mb4
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_lists VARCHAR(20) DEFAULT 'to,cc,bcc';
  DECLARE v_k INT DEFAULT 1;
  DECLARE v_key VARCHAR(8);
  DECLARE v_list LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_i INT;
  DECLARE v_item LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_name LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_address LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_address_key VARCHAR(320) CHARACTER SET utf8mb4;
  DECLARE v_erased_key VARCHAR(72) CHARACTER SET utf8mb4;
  DECLARE v_new_erased_key VARCHAR(72) CHARACTER SET utf8mb4;
  DECLARE v_dropped LONGTEXT CHARACTER SET utf8mb4
    DEFAULT COALESCE(JSON_EXTRACT(p_doc, '$.suppressed_recipients'), JSON_ARRAY());
  DECLARE v_new INT DEFAULT 0;
  DECLARE v_kept INT DEFAULT 0;
  SET p_out = p_doc, p_first_address = NULL;
  WHILE v_k <= 3 DO
    SET v_key = SUBSTRING_INDEX(SUBSTRING_INDEX(v_lists, ',', v_k), ',', -1);
    SET v_list = JSON_EXTRACT(p_out, CONCAT('$.', v_key));
    IF JSON_TYPE(v_list) = 'ARRAY' THEN
      -- Backwards, so removing one leaves the positions still to visit where they were.
      SET v_i = JSON_LENGTH(v_list) - 1;
      WHILE v_i >= 0 DO
        SET v_item = JSON_UNQUOTE(JSON_EXTRACT(v_list, CONCAT('$[', v_i, ']')));
        CALL email_internal_split_mailbox(v_item, v_name, v_address);
        CALL email_internal_address_key(v_address, v_address_key);
        CALL email_internal_erased_key(v_address, v_new_erased_key, v_erased_key);
        IF EXISTS (SELECT 1 FROM email_suppressed_addresses
                    WHERE address_key IN (v_address_key COLLATE utf8mb4_bin, v_erased_key COLLATE utf8mb4_bin)) THEN
          SET v_list = JSON_REMOVE(v_list, CONCAT('$[', v_i, ']'));
          SET v_dropped = JSON_ARRAY_APPEND(v_dropped, '$', v_item), v_new = v_new + 1;
        ELSE
          SET v_kept = v_kept + 1;
        END IF;
        SET v_i = v_i - 1;
      END WHILE;
      SET p_out = JSON_SET(p_out, CONCAT('$.', v_key), JSON_EXTRACT(v_list, '$'));
      IF p_first_address IS NULL AND JSON_LENGTH(v_list) > 0 THEN
        CALL email_internal_split_mailbox(JSON_UNQUOTE(JSON_EXTRACT(v_list, '$[0]')), v_name, p_first_address);
      END IF;
    END IF;
    SET v_k = v_k + 1;
  END WHILE;
  IF v_kept = 0 THEN
    SET p_out = p_doc, p_first_address = NULL;
  ELSEIF v_new = 0 THEN
    SET p_out = p_doc;  -- unchanged, text and all
  ELSE
    SET p_out = JSON_SET(p_out, '$.suppressed_recipients', JSON_EXTRACT(v_dropped, '$'));
  END IF;
END
