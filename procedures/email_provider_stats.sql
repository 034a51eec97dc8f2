-- What SES reviews an account on, from the events recorded: counts per event type over the last
-- p_window_seconds (by the events' own time), the bounce rate (permanent bounces per Send) and the
-- complaint rate (complaints per Send), NULL when no Send event was recorded in the window; the
-- suppression list's size; and UnknownOutcome rows with no evidence after p_evidence_wait_seconds
-- (those need an operator: absence of an event is not proof). Result: one row, window_seconds, the
-- counts (sends, deliveries, delays, bounces, permanent_bounces, complaints, rejects,
-- rendering_failures), bounce_rate, complaint_rate, suppressed_addresses, unknown_without_evidence.
CREATE PROCEDURE email_provider_stats(
  IN p_window_seconds BIGINT,
  IN p_evidence_wait_seconds BIGINT
)
READS SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
  DECLARE v_since DATETIME(6);
  DECLARE v_sends BIGINT DEFAULT 0;
  DECLARE v_hard BIGINT DEFAULT 0;
  DECLARE v_complaints BIGINT DEFAULT 0;
  IF p_window_seconds IS NULL OR p_window_seconds < 1 OR p_window_seconds > 31622400 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_provider_stats: window_seconds must be 1 to 31622400';
  END IF;
  IF p_evidence_wait_seconds IS NULL OR p_evidence_wait_seconds < 0 OR p_evidence_wait_seconds > 31622400 THEN
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = 'email_provider_stats: evidence_wait_seconds must be 0 to 31622400';
  END IF;
  SET v_since = v_now - INTERVAL p_window_seconds SECOND;
  SELECT COUNT(*) INTO v_sends FROM email_provider_events WHERE event_type = 'Send' AND event_at >= v_since;
  SELECT COUNT(*) INTO v_hard FROM email_provider_events
   WHERE event_type = 'Bounce' AND event_at >= v_since AND kind = 'Permanent';
  SELECT COUNT(*) INTO v_complaints FROM email_provider_events WHERE event_type = 'Complaint' AND event_at >= v_since;
  SELECT p_window_seconds AS window_seconds,
         v_sends AS sends,
         (SELECT COUNT(*) FROM email_provider_events WHERE event_type = 'Delivery' AND event_at >= v_since) AS deliveries,
         (SELECT COUNT(*) FROM email_provider_events WHERE event_type = 'DeliveryDelay' AND event_at >= v_since) AS delays,
         (SELECT COUNT(*) FROM email_provider_events WHERE event_type = 'Bounce' AND event_at >= v_since) AS bounces,
         v_hard AS permanent_bounces,
         v_complaints AS complaints,
         (SELECT COUNT(*) FROM email_provider_events WHERE event_type = 'Reject' AND event_at >= v_since) AS rejects,
         (SELECT COUNT(*) FROM email_provider_events WHERE event_type = 'RenderingFailure' AND event_at >= v_since) AS rendering_failures,
         IF(v_sends = 0, NULL, v_hard / v_sends) AS bounce_rate,
         IF(v_sends = 0, NULL, v_complaints / v_sends) AS complaint_rate,
         (SELECT COUNT(*) FROM email_suppressed_addresses) AS suppressed_addresses,
         (SELECT COUNT(*) FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_lease)
           WHERE a.status = 'UnknownOutcome'
             AND a.updated_at <= v_now - INTERVAL p_evidence_wait_seconds SECOND
             AND NOT EXISTS (SELECT 1 FROM email_provider_events e
                              WHERE e.attempt_id = a.id AND e.evidence = 1)) AS unknown_without_evidence;
END
