-- Internal: one claimed whole message (email_enqueue_message) whose cc, bcc or other to addresses were
-- put on the suppression list since its enqueue has them left out now, as the enqueue would have: the
-- send never hands them to SES, and message_options.suppressed_recipients says who and why they did
-- not get it. Called for each such row of a batch claim (fragment drop_suppressed_claims) and by
-- email_try_claim, inside their transaction. A row without message_options is left alone.
CREATE PROCEDURE email_internal_drop_suppressed_row(
  IN p_id BIGINT UNSIGNED
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_options LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_kept LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_first LONGTEXT CHARACTER SET utf8mb4;
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  SELECT message_options INTO v_options FROM email_delivery_attempts FORCE INDEX (PRIMARY) WHERE id = p_id;
  IF v_options IS NOT NULL AND EXISTS (SELECT 1 FROM email_suppressed_addresses) THEN
    CALL email_internal_drop_suppressed(v_options, v_kept, v_first);
    IF v_first IS NOT NULL AND v_kept <> v_options THEN
      UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
         SET message_options = v_kept, row_version = row_version + 1
       WHERE id = p_id;
    END IF;
  END IF;
END
