-- Internal: the redrive rule, once, for email_redrive_failed and email_redrive_failed_batch. A row may
-- be redriven when it is Failed and SES never accepted it: no provider MessageId, no SES event that
-- proves acceptance (Send, Delivery, Bounce, Complaint, DeliveryDelay), and never UnknownOutcome (a
-- send that may have reached SES is the operator's requeue, with its warning, not a redrive), and not
-- one that was cancelled or expired (last_error_code 'Cancelled', 'Expired': it must never go). Then:
-- Pending, due now, attempt_count 0 (a fresh attempt budget), the same notification id, one audited
-- transition Failed -> Pending naming the actor and the reason. p_dry_run = 1 only answers whether it
-- would. A row whose content is gone would be sent empty or fail unknowably, so it is never redriven:
-- erased (its addresses and subject blanked), its bodies purged (retention, purge), or an attachment
-- missing from email_attachments; p_refuse = 1 refuses it with 45009 naming why (the single redrive),
-- 0 passes over it (a batch). Inside the caller's unit of work. p_affected: 1 redriven (or would be),
-- 0 otherwise.
CREATE PROCEDURE email_internal_redrive(
  IN p_id BIGINT UNSIGNED,
  IN p_now DATETIME(6),
  IN p_redriven_by VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_reason TEXT CHARACTER SET utf8mb4,
  IN p_dry_run INT,
  IN p_refuse INT,
  OUT p_affected BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_error VARCHAR(191) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_attempts INT UNSIGNED DEFAULT NULL;
  DECLARE v_gone VARCHAR(200) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  SET p_affected = 0;
  SELECT a.last_error_code, a.attempt_count,
         CASE WHEN a.to_address = '' THEN 'it was erased (email_erase_address): its recipients and subject are gone'
              WHEN a.bodies_purged_at IS NOT NULL THEN 'its bodies were purged (retention): it would go out empty'
              WHEN COALESCE(JSON_EXTRACT(a.message_options, '$.attachment_count'), 0)
                   <> (SELECT COUNT(*) FROM email_attachments AS t WHERE t.attempt_id = a.id)
                THEN 'an attachment is missing from email_attachments'
         END
    INTO v_error, v_attempts, v_gone
    FROM email_delivery_attempts AS a FORCE INDEX (PRIMARY)
   WHERE a.id = p_id
     AND a.status = 'Failed'
     AND a.provider_message_id IS NULL
     -- Cancelled by its sender, or past its expires_at: never to be sent (email_cancel, issue 26).
     AND NOT (a.last_error_code <=> 'Cancelled' OR a.last_error_code <=> 'Expired')
     AND NOT EXISTS (SELECT 1 FROM email_provider_events AS e
                      WHERE e.attempt_id = a.id
                        AND e.event_type IN ('Send', 'Delivery', 'Bounce', 'Complaint', 'DeliveryDelay'))
     AND NOT EXISTS (SELECT 1 FROM email_delivery_events AS d
                      WHERE d.attempt_id = a.id AND d.to_status = 'UnknownOutcome')
     FOR UPDATE;
  IF v_gone IS NOT NULL THEN
    SET v_attempts = NULL;
    IF p_refuse = 1 THEN
      SET v_gone = CONCAT('email_redrive_failed: row ', p_id, ' cannot be redriven: ', v_gone);
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45009, MESSAGE_TEXT = v_gone;
    END IF;
  END IF;
  IF v_attempts IS NOT NULL THEN
    IF p_dry_run = 1 THEN
      SET p_affected = 1;
    ELSE
      UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
         SET status = 'Pending',
             attempt_count = 0,
             next_attempt_at = p_now,
             row_version = row_version + 1,
             updated_at = p_now
       WHERE id = p_id
         AND status = 'Failed';
      SET p_affected = ROW_COUNT();
      IF p_affected = 1 THEN
        CALL email_internal_record_event(p_id, p_now, 'Failed', 'Pending', NULL, p_redriven_by,
          LEFT(CONCAT('redriven: ', p_reason, ' (was Failed after ', v_attempts, ' attempts, last error ',
                      COALESCE(v_error, '-'), ')'), 2000));
      END IF;
    END IF;
  END IF;
END
