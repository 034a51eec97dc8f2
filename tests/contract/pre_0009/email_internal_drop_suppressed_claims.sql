-- Internal: inside email_internal_claim_batch's transaction, after email_internal_fail_suppressed_claims.
-- A whole message (email_enqueue_message) just claimed whose cc, bcc or other to addresses were put on
-- the suppression list since its enqueue has them left out now, as the enqueue would have: the send
-- never hands them to SES, and message_options.suppressed_recipients says who and why they did not get it.
CREATE PROCEDURE email_internal_drop_suppressed_claims()
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_options LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_kept LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_first LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_done INT DEFAULT 0;
  DECLARE c_messages CURSOR FOR
    SELECT a.id, a.message_options
      FROM email_claim_batch_ids c
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
     WHERE a.message_options IS NOT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  -- Nearly always there is nothing to do: no whole message in the claim, or an empty list.
  IF EXISTS (SELECT 1 FROM email_suppressed_addresses)
     AND EXISTS (SELECT 1 FROM email_claim_batch_ids c
                   STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
                  WHERE a.message_options IS NOT NULL) THEN
    OPEN c_messages;
    each_message: LOOP
      FETCH c_messages INTO v_id, v_options;
      IF v_done = 1 THEN
        LEAVE each_message;
      END IF;
      CALL email_internal_drop_suppressed(v_options, v_kept, v_first);
      IF v_first IS NOT NULL AND v_kept <> v_options THEN
        UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
           SET message_options = v_kept, row_version = row_version + 1
         WHERE id = v_id;
      END IF;
    END LOOP;
    CLOSE c_messages;
  END IF;
END
