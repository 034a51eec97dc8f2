-- Record one SES event (event publishing through a configuration set), once, and act on it. Callable
-- from any language: pass the fields of the event record (docs/procedures.md says which).
-- Idempotent on the event's identity (type, SES MessageId, recipient, event time): a redelivered or
-- replayed event changes nothing. Arrival order does not matter.
--  * Matching: by SES MessageId first (a row whose provider_message_id it is, and only for a recipient
--    of that row's message, compared without case: its to_address or any to, cc or bcc of its
--    document; an event naming another address is not that row's, however real its MessageId), else
--    by the outbox_id
--    tag (a row with that id to that recipient). A tag naming a row that may have been sent with no
--    MessageId known (Processing, UnknownOutcome, or requeued after UnknownOutcome) and was sent to
--    the recipient as another to, a cc or a bcc records the event (and suppresses) but never settles
--    the row (evidence = 0). Neither: not this outbox's mail; nothing is written.
--  * Each email's latest provider state (email_delivery_status): the latest event time wins.
--  * An UnknownOutcome row becomes Sent on evidence that SES accepted it, Failed on a Reject or
--    RenderingFailure, audited with the evidence (email_internal_resolve_from_event).
--  * A permanent bounce or a complaint puts the recipient on the suppression list.
-- Result: affected (1 recorded, 0 duplicate or not ours), attempt_id (NULL: not ours), outcome
-- ('recorded', 'duplicate', 'unmatched'), resolved ('Sent', 'Failed' or NULL), suppressed (1: the
-- recipient was added to the suppression list). Runs inside the caller's transaction when there is
-- one (a batch of events commits once), else in its own.
CREATE PROCEDURE email_record_provider_event(
  IN p_event_type TEXT CHARACTER SET utf8mb4,
  IN p_ses_message_id TEXT CHARACTER SET utf8mb4,
  IN p_outbox_id TEXT CHARACTER SET utf8mb4,
  IN p_recipient TEXT CHARACTER SET utf8mb4,
  IN p_event_at DATETIME(6),
  IN p_kind TEXT CHARACTER SET utf8mb4,
  IN p_subkind TEXT CHARACTER SET utf8mb4,
  IN p_detail TEXT CHARACTER SET utf8mb4,
  IN p_recorded_by TEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_type VARCHAR(32) CHARACTER SET utf8mb4;
  DECLARE v_state VARCHAR(20) CHARACTER SET utf8mb4;
  DECLARE v_rank INT DEFAULT 0;
  DECLARE v_order BIGINT UNSIGNED;
  DECLARE v_key BINARY(32);
  DECLARE v_recipient_key VARCHAR(320) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_tag_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_tag_row BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_tag_to VARCHAR(320) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_tag_doc LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_row_key VARCHAR(320) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_tag_copy INT DEFAULT 0;
  DECLARE v_tag_mid VARCHAR(191) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_mid_row BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_mid_to VARCHAR(320) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_mid_doc LONGTEXT CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_mid_key VARCHAR(320) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_mid_recipient INT DEFAULT 0;
  DECLARE v_attempt BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_address VARCHAR(320) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_note VARCHAR(500) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_event_id BIGINT UNSIGNED DEFAULT NULL;
  DECLARE v_resolved VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_suppressed INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_own INT DEFAULT NULL;
  DECLARE v_all TEXT CHARACTER SET utf8mb4;
  DECLARE v_bad_text INT DEFAULT 0;
  DECLARE v_mid VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
  DECLARE v_status VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE v_tag_status VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT NULL;
  DECLARE CONTINUE HANDLER FOR 1062 SET v_duplicate = 1;
  -- A look-up that finds no row is an answer (not ours), not a condition for the caller.
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    CALL email_internal_undo(v_own);
    RESIGNAL;
  END;

  -- SES spells RenderingFailure's eventType 'Rendering Failure'; both are accepted.
  SET v_type = IF(p_event_type = 'Rendering Failure', 'RenderingFailure', LEFT(p_event_type, 32));
  IF p_event_type IS NULL OR v_type COLLATE utf8mb4_bin NOT IN
       ('Send', 'Delivery', 'Bounce', 'Complaint', 'Reject', 'RenderingFailure', 'DeliveryDelay') THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT =
      'email_record_provider_event: event_type must be Send, Delivery, Bounce, Complaint, Reject, RenderingFailure or DeliveryDelay';
  END IF;
  IF p_ses_message_id IS NULL OR CHAR_LENGTH(p_ses_message_id) < 1 OR CHAR_LENGTH(p_ses_message_id) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_record_provider_event: ses_message_id must be 1 to 191 characters';
  END IF;
  IF CHAR_LENGTH(p_outbox_id) > 191 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_record_provider_event: outbox_id must be at most 191 characters';
  END IF;
  IF CHAR_LENGTH(p_recipient) > 320 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_record_provider_event: recipient must be at most 320 characters';
  END IF;
  IF p_event_at IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_record_provider_event: event_at is required (the event''s own UTC time)';
  END IF;
  IF CHAR_LENGTH(p_kind) > 64 OR CHAR_LENGTH(p_subkind) > 64 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_record_provider_event: kind and subkind must be at most 64 characters';
  END IF;
  CALL email_internal_check_name('email_record_provider_event', 'recorded_by', p_recorded_by, 191);
  -- The text rules once over every field together, the hot path of a batch; only when that fails is
  -- each field checked alone, so the error names the one at fault.
  SET v_all = CONCAT_WS(' ', p_ses_message_id, p_outbox_id, p_recipient, p_kind, p_subkind, p_detail);
  BEGIN
    DECLARE CONTINUE HANDLER FOR SQLSTATE '45000' SET v_bad_text = 1;
    CALL email_internal_check_text('email_record_provider_event', 'fields', v_all, 'text');
  END;
  IF v_bad_text = 1 THEN
    CALL email_internal_check_text('email_record_provider_event', 'ses_message_id', p_ses_message_id, 'text');
    CALL email_internal_check_text('email_record_provider_event', 'outbox_id', p_outbox_id, 'text');
    CALL email_internal_check_text('email_record_provider_event', 'recipient', p_recipient, 'text');
    CALL email_internal_check_text('email_record_provider_event', 'kind', p_kind, 'text');
    CALL email_internal_check_text('email_record_provider_event', 'subkind', p_subkind, 'text');
    CALL email_internal_check_text('email_record_provider_event', 'detail', p_detail, 'text');
  END IF;
  SET v_mid = p_ses_message_id;

  CALL email_internal_address_key(p_recipient, v_recipient_key);
  -- Match. SES's MessageId is unique and decides; the outbox_id tag is this outbox's own word, which
  -- another outbox sharing the SES account may also use, so a tag counts only for a row to that recipient.
  SELECT id, status, to_address INTO v_mid_row, v_status, v_mid_to
    FROM email_delivery_attempts WHERE provider_message_id = v_mid LIMIT 1;
  -- A MessageId is no secret (it is in every delivered message's headers): it matches only for an
  -- address the row's message was sent to, so a forged complaint cannot put anyone else on the
  -- suppression list or write that row's provider state.
  -- Compared without case, local part included: a mail system or a bounce report may change the
  -- case of what SES was given, and the MessageId already ties the event to this message.
  IF v_mid_row IS NOT NULL AND v_recipient_key IS NOT NULL THEN
    CALL email_internal_address_key(v_mid_to, v_mid_key);
    IF LOWER(v_mid_key) = LOWER(v_recipient_key) COLLATE utf8mb4_bin THEN
      SET v_mid_recipient = 1;
    ELSE
      SELECT message_options INTO v_mid_doc FROM email_delivery_attempts WHERE id = v_mid_row;
      CALL email_internal_message_has_recipient(LOWER(v_mid_doc), LOWER(v_recipient_key), v_mid_recipient);
    END IF;
    IF v_mid_recipient = 0 THEN
      SET v_mid_row = NULL, v_status = NULL;
    END IF;
  END IF;
  IF p_outbox_id REGEXP '^[0-9]{1,19}$' THEN
    SET v_tag_id = CAST(p_outbox_id AS UNSIGNED);
    SELECT id, to_address, provider_message_id, status INTO v_tag_row, v_tag_to, v_tag_mid, v_tag_status
      FROM email_delivery_attempts WHERE id = v_tag_id;
    -- An event naming no recipient cannot be checked against the row, so its tag is not trusted either.
    IF v_tag_row IS NOT NULL AND v_recipient_key IS NULL THEN
      SET v_note = CONCAT('outbox_id tag ', v_tag_id, ' on an event with no recipient: tag ignored');
      SET v_tag_row = NULL;
    ELSEIF v_tag_row IS NOT NULL THEN
      CALL email_internal_address_key(v_tag_to, v_row_key);
      -- A cc or bcc of a whole message counts only for a row that may have been sent without the
      -- outbox learning its MessageId (Processing, UnknownOutcome, or requeued after UnknownOutcome),
      -- and only as a record (history, provider state, suppression), never as evidence that settles
      -- the row: an archive address another outbox sharing the SES account also copies would
      -- otherwise match every row with its id.
      IF v_row_key <> v_recipient_key COLLATE utf8mb4_bin AND v_tag_mid IS NULL AND v_mid_row IS NULL
         AND (v_tag_status IN ('Processing', 'UnknownOutcome')
              OR (v_tag_status IN ('Pending', 'Retrying')
                  AND EXISTS (SELECT 1 FROM email_delivery_events WHERE attempt_id = v_tag_row
                                 AND from_status = 'UnknownOutcome' AND to_status = 'Pending'))) THEN
        SELECT message_options INTO v_tag_doc FROM email_delivery_attempts WHERE id = v_tag_row;
        CALL email_internal_message_has_recipient(v_tag_doc, v_recipient_key, v_tag_copy);
      END IF;
      IF v_row_key <> v_recipient_key COLLATE utf8mb4_bin AND v_tag_copy = 0 THEN
        SET v_note = CONCAT('outbox_id tag ', v_tag_id, ' names an email to another address: tag ignored');
        SET v_tag_row = NULL;
      END IF;
    END IF;
  END IF;
  IF v_mid_row IS NOT NULL THEN
    SET v_attempt = v_mid_row;
    IF v_tag_row IS NOT NULL AND v_tag_row <> v_mid_row THEN
      SET v_note = CONCAT('outbox_id tag says ', v_tag_row, ' but the SES MessageId is email ', v_mid_row,
                          '''s: recorded for ', v_mid_row, ' (the MessageId decides), ', v_tag_row, ' untouched');
    ELSEIF v_tag_row IS NOT NULL THEN
      SET v_note = 'outbox_id tag and MessageId agree';
    ELSE
      SET v_note = CONCAT_WS('; ', v_note, 'matched by MessageId (no usable outbox_id tag)');
    END IF;
  ELSEIF v_tag_row IS NOT NULL THEN
    SET v_attempt = v_tag_row, v_status = v_tag_status;
    IF v_tag_copy = 1 THEN
      SET v_note = 'matched by outbox_id tag through a cc or bcc recipient; the MessageId was not yet known to the outbox: recorded, no evidence for the row';
    ELSEIF v_tag_mid IS NULL THEN
      SET v_note = 'matched by outbox_id tag; the MessageId was not yet known to the outbox';
    ELSE
      SET v_note = CONCAT('matched by outbox_id tag, but the email''s own MessageId is ', v_tag_mid,
                          ': SES accepted this email more than once (requeued after an unknown outcome?)');
    END IF;
  END IF;
  IF v_attempt IS NULL THEN
    SELECT 0 AS affected, NULL AS attempt_id, 'unmatched' AS outcome, NULL AS resolved, 0 AS suppressed;
  ELSE
    SET v_key = UNHEX(SHA2(CONCAT_WS('|', v_type, p_ses_message_id, COALESCE(v_recipient_key, ''),
                                     DATE_FORMAT(p_event_at, '%Y-%m-%d %H:%i:%s.%f')), 256));
    CALL email_internal_begin(v_own);
    INSERT INTO email_provider_events
      (event_key, attempt_id, event_type, ses_message_id, recipient, event_at, kind, subkind, detail,
       match_note, evidence, recorded_at, recorded_by)
    VALUES
      (v_key, v_attempt, v_type, p_ses_message_id, p_recipient, p_event_at, p_kind, p_subkind,
       LEFT(p_detail, 2000), v_note, 1 - v_tag_copy, v_now, p_recorded_by);
    IF v_duplicate = 1 THEN
      CALL email_internal_end(v_own);
      SELECT 0 AS affected, v_attempt AS attempt_id, 'duplicate' AS outcome, NULL AS resolved, 0 AS suppressed;
    ELSE
      SET v_event_id = LAST_INSERT_ID();
      -- The latest provider state: the event with the greatest (time, rank) wins, whatever the order
      -- of arrival. state_order is assigned last, so every IF above it reads the old value under
      -- MySQL's left-to-right and MariaDB's simultaneous assignment alike.
      SET v_state = ELT(FIELD(v_type, 'Send', 'DeliveryDelay', 'Delivery', 'Bounce', 'Complaint', 'Reject', 'RenderingFailure'),
                        'sent', 'delayed', 'delivered', 'bounced', 'complained', 'rejected', 'rendering_failed');
      SET v_rank = FIELD(v_type, 'Send', 'DeliveryDelay', 'Delivery', 'Bounce', 'Complaint', 'Reject', 'RenderingFailure');
      SET v_order = GREATEST(0, TIMESTAMPDIFF(MICROSECOND, '2000-01-01 00:00:00', p_event_at)) * 10 + v_rank;
      INSERT INTO email_delivery_status
        (attempt_id, state, state_at, state_order, ses_message_id, kind, subkind, event_count, updated_at)
      VALUES
        (v_attempt, v_state, p_event_at, v_order, p_ses_message_id, p_kind, p_subkind, 1, v_now)
      ON DUPLICATE KEY UPDATE
        state = IF(state_order < v_order, v_state, state),
        state_at = IF(state_order < v_order, p_event_at, state_at),
        ses_message_id = IF(state_order < v_order, p_ses_message_id, ses_message_id),
        kind = IF(state_order < v_order, p_kind, kind),
        subkind = IF(state_order < v_order, p_subkind, subkind),
        event_count = event_count + 1,
        updated_at = v_now,
        state_order = GREATEST(state_order, v_order);
      -- Its tenant's hourly counts, for the reputation guard (email_tenant_guard).
      IF v_tag_copy = 0 AND (v_type = 'Send' OR v_type = 'Complaint'
                             OR (v_type = 'Bounce' AND p_kind = 'Permanent')) THEN
        INSERT INTO email_tenant_event_hours (tenant_id, hour_at, sends, permanent_bounces, complaints)
        SELECT a.tenant_id, DATE_FORMAT(p_event_at, '%Y-%m-%d %H:00:00'), v_type = 'Send', v_type = 'Bounce',
               v_type = 'Complaint'
          FROM email_delivery_attempts a WHERE a.id = v_attempt
        ON DUPLICATE KEY UPDATE sends = sends + (v_type = 'Send'),
                                permanent_bounces = permanent_bounces + (v_type = 'Bounce'),
                                complaints = complaints + (v_type = 'Complaint');
      END IF;
      -- Only an UnknownOutcome row can be settled (the update is guarded by status anyway). A row that
      -- became UnknownOutcome after this read is settled by email_resolve_unknown_from_evidence.
      IF v_status = 'UnknownOutcome' AND v_tag_copy = 0 THEN
        CALL email_internal_resolve_from_event(v_attempt, v_now, v_type, p_ses_message_id, p_event_at, v_note,
                                               p_recorded_by, v_resolved);
      END IF;
      IF (v_type = 'Bounce' AND (p_kind = 'Permanent' OR p_subkind = 'OnAccountSuppressionList'))
         OR (v_type = 'Complaint' AND COALESCE(p_kind, '') <> 'not-spam') THEN
        SET v_address = p_recipient;
        IF v_address IS NULL THEN
          SELECT to_address INTO v_address FROM email_delivery_attempts WHERE id = v_attempt;
        END IF;
        CALL email_internal_suppress_address(v_now, v_address, LOWER(v_type),
          LEFT(CONCAT_WS(' ', CONCAT('SES ', v_type), p_kind, p_subkind, CONCAT('for MessageId ', p_ses_message_id),
                         CONCAT('at ', DATE_FORMAT(p_event_at, '%Y-%m-%dT%H:%i:%s.%fZ'))), 2000),
          v_event_id, v_attempt, p_ses_message_id, p_recorded_by, v_suppressed);
      END IF;
      CALL email_internal_end(v_own);
      SELECT 1 AS affected, v_attempt AS attempt_id, 'recorded' AS outcome, v_resolved AS resolved,
             v_suppressed AS suppressed;
    END IF;
  END IF;
END
