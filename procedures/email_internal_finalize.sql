-- Internal: one finalize (the end of a claim), with its arguments checked, for the four finalize
-- procedures, email_finalize_batch and email_finalize_and_start. Every rule about a finalize's
-- arguments lives here once. A reservation's start mark is not a finalize: its callers check the
-- claim (email_internal_check_claim) and call email_internal_start themselves.
--   p_where       the public procedure named in an error
--   p_outcome     the status to write: 'Sent', 'Failed', 'Retrying', 'UnknownOutcome' or 'Released'
--   p_delay_field how the caller names the delay in an error (retry_delay_seconds, delay_seconds)
-- p_to_status is the status written; NULL when this claim no longer held the row.
CREATE PROCEDURE email_internal_finalize(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_id BIGINT,
  IN p_claim_token TEXT CHARACTER SET utf8mb4,
  IN p_outcome VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_provider_message_id TEXT CHARACTER SET utf8mb4,
  IN p_error_code TEXT CHARACTER SET utf8mb4,
  IN p_error_message TEXT CHARACTER SET utf8mb4,
  IN p_delay_field VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_delay_seconds BIGINT,
  OUT p_to_status VARCHAR(20) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(255) CHARACTER SET utf8mb4;
  CALL email_internal_check_claim(p_where, p_id, p_claim_token);
  IF p_outcome IS NULL OR p_outcome NOT IN ('Sent', 'Failed', 'Retrying', 'UnknownOutcome', 'Released') THEN
    SET v_message = CONCAT(p_where, ': outcome must be Sent, Failed, Retrying, UnknownOutcome or Released');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  IF p_outcome = 'Sent' AND (p_provider_message_id IS NULL OR CHAR_LENGTH(p_provider_message_id) < 1
                             OR CHAR_LENGTH(p_provider_message_id) > 191) THEN
    SET v_message = CONCAT(p_where, ': provider_message_id must be 1 to 191 characters');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  IF CHAR_LENGTH(p_error_code) > 191 THEN
    SET v_message = CONCAT(p_where, ': error_code must be at most 191 characters');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  IF p_outcome IN ('Retrying', 'Failed', 'Released')
     AND (p_delay_seconds IS NULL OR p_delay_seconds < 0 OR p_delay_seconds > 604800) THEN
    SET v_message = CONCAT(p_where, ': ', p_delay_field, ' must be 0 to 604800');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
  END IF;
  CALL email_internal_settle(p_id, p_claim_token, p_outcome, COALESCE(p_delay_seconds, 0),
    IF(p_outcome = 'UnknownOutcome', 'AmbiguousOutcome', p_error_code), p_error_message,
    IF(p_outcome = 'Sent', p_provider_message_id, NULL), NULL, NULL, NULL, p_to_status);
END
