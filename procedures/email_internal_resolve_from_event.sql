-- Internal: evidence from SES settles an UnknownOutcome row, inside the caller's unit of work. An
-- event proving SES accepted the message (Send, Delivery, Bounce, Complaint, DeliveryDelay) makes it
-- Sent and fills in the provider MessageId when it has none; a Reject or RenderingFailure makes it
-- Failed. Guarded by id and status: any other status is left alone (0). The audit event names the
-- evidence: event type, SES MessageId, event time, and what was seen (p_note). Nothing is sent.
-- p_to: 'Sent', 'Failed', or NULL when nothing changed.
CREATE PROCEDURE email_internal_resolve_from_event(
  IN p_id BIGINT UNSIGNED,
  IN p_now DATETIME(6),
  IN p_event_type VARCHAR(32) CHARACTER SET utf8mb4,
  IN p_ses_message_id VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_event_at DATETIME(6),
  IN p_note VARCHAR(500) CHARACTER SET utf8mb4,
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  OUT p_to VARCHAR(20) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_outcome VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_requeued VARCHAR(200) CHARACTER SET utf8mb4 DEFAULT '';
  SET p_to = NULL;
  IF p_event_type IN ('Send', 'Delivery', 'Bounce', 'Complaint', 'DeliveryDelay') THEN
    SET v_outcome = 'Sent';
  ELSEIF p_event_type IN ('Reject', 'RenderingFailure') THEN
    SET v_outcome = 'Failed';
  END IF;
  IF v_outcome IS NOT NULL THEN
    UPDATE email_delivery_attempts FORCE INDEX (PRIMARY)
       SET status = v_outcome,
           provider_message_id = IF(v_outcome = 'Sent', COALESCE(provider_message_id, p_ses_message_id), provider_message_id),
           sent_at = IF(v_outcome = 'Sent', p_now, sent_at),
           last_error_code = IF(v_outcome = 'Failed', CONCAT('Ses', p_event_type), last_error_code),
           last_error_message = IF(v_outcome = 'Failed',
             CONCAT('SES reported ', p_event_type, ' for MessageId ', p_ses_message_id), last_error_message),
           row_version = row_version + 1,
           updated_at = p_now
     WHERE id = p_id
       AND status = 'UnknownOutcome';
    IF ROW_COUNT() = 1 THEN
      SET p_to = v_outcome;
      -- A row an operator requeued may have reached SES more than once: say so beside the evidence.
      IF EXISTS (SELECT 1 FROM email_delivery_events
                  WHERE attempt_id = p_id AND from_status = 'UnknownOutcome' AND to_status = 'Pending') THEN
        SET v_requeued = '; the row was requeued after an earlier UnknownOutcome, so SES may have accepted more than one send: this evidence is for the MessageId named';
      END IF;
      CALL email_internal_record_event(p_id, p_now, 'UnknownOutcome', v_outcome, NULL, p_actor,
        LEFT(CONCAT('resolved as ', v_outcome, ' from SES evidence: ', p_event_type, ' event, SES MessageId ',
                    p_ses_message_id, ', event time ', DATE_FORMAT(p_event_at, '%Y-%m-%dT%H:%i:%s.%fZ'),
                    COALESCE(CONCAT('; ', p_note), ''), v_requeued), 2000));
    END IF;
  END IF;
END
