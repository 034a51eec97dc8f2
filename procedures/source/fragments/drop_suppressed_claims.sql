-- Inside the batch claim's transaction (claim_batch), after fail_suppressed_claims: each whole
-- message (email_enqueue_message) just claimed has its recipients suppressed since its enqueue left
-- out (email_internal_drop_suppressed_row, called only for such a message while the list has an
-- entry). A block of its own (its cursor and handler).
BEGIN
  DECLARE v_id BIGINT UNSIGNED;
  DECLARE v_done INT DEFAULT 0;
  DECLARE c_messages CURSOR FOR
    SELECT a.id
      FROM email_claim_batch_rows c
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
     WHERE a.message_options IS NOT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = 1;
  -- Nearly always there is nothing to do: no whole message in the claim, or an empty list.
  IF EXISTS (SELECT 1 FROM email_suppressed_addresses)
     AND EXISTS (SELECT 1 FROM email_claim_batch_rows c
                   STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
                  WHERE a.message_options IS NOT NULL) THEN
    OPEN c_messages;
    each_message: LOOP
      FETCH c_messages INTO v_id;
      IF v_done = 1 THEN
        LEAVE each_message;
      END IF;
      CALL email_internal_drop_suppressed_row(v_id);
    END LOOP;
    CLOSE c_messages;
  END IF;
END;
