-- Inside the batch claim's transaction (claim_batch), after its locking reads: rows just locked for
-- the claim (email_claim_batch_rows) whose recipient is on the suppression list end Failed
-- ('Suppressed', never handed to SES, no attempt counted), audited in one statement, and leave the
-- id list, so the claim neither takes nor returns them. The batch form of
-- email_internal_fail_if_suppressed. A block of its own (its variable).
--   now    the claim's time
--   actor  who claims (the events' actor)
BEGIN
  DECLARE v_found INT DEFAULT 0;
  CREATE TEMPORARY TABLE IF NOT EXISTS email_claim_suppressed_ids (
    id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    from_status ENUM('Pending', 'Retrying') NOT NULL,
    why VARCHAR(1000) CHARACTER SET utf8mb4 NOT NULL
  ) ENGINE = MEMORY;
  DELETE FROM email_claim_suppressed_ids;
  -- The address key inline (email_internal_address_key spells the same rule): local part exact,
  -- domain lower-cased, compared byte for byte through the unique key.
  INSERT INTO email_claim_suppressed_ids (id, from_status, why)
  SELECT c.id, c.from_status,
         LEFT(CONCAT('not sent: ', a.to_address, ' is on the suppression list (', s.reason, ': ', s.detail, ')'), 1000)
    FROM email_claim_batch_rows c
         STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
         STRAIGHT_JOIN email_suppressed_addresses s
           ON s.address_key = CONCAT(
                LEFT(a.to_address, CHAR_LENGTH(a.to_address) - CHAR_LENGTH(SUBSTRING_INDEX(a.to_address, '@', -1)) - 1),
                '@', LOWER(SUBSTRING_INDEX(a.to_address, '@', -1))) COLLATE utf8mb4_bin;
  SET v_found = ROW_COUNT();
  -- Erased addresses are on the list by keyed hash under one of the keys held (one or two;
  -- email_internal_erased_key spells the forms): computed per row and key only while there is such
  -- an entry at all, each an index lookup.
  IF EXISTS (SELECT 1 FROM email_suppressed_addresses WHERE address_key LIKE '#%') THEN
    INSERT INTO email_claim_suppressed_ids (id, from_status, why)
    SELECT c.id, c.from_status,
           LEFT(CONCAT('not sent: ', a.to_address, ' is on the suppression list (', s.reason, ': ', s.detail, ')'), 1000)
      FROM email_claim_batch_rows c
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = c.id
           STRAIGHT_JOIN email_outbox_keys k ON TRUE  -- every key held, one or two
           STRAIGHT_JOIN email_suppressed_addresses s
             ON s.address_key IN (
                  CONCAT('#', k.id, ':', {{>erasure_hmac | message = CONVERT(CONCAT('address:', LOWER(a.to_address)) USING utf8mb4) | keys = k.}}) COLLATE utf8mb4_bin,
                  IF(k.legacy = 1, CONCAT('#', SHA2(CONCAT(HEX(k.secret), ':', LOWER(a.to_address)), 256)), NULL) COLLATE utf8mb4_bin)
    -- (one entry per row even if several keys matched)
    ON DUPLICATE KEY UPDATE why = email_claim_suppressed_ids.why;
    SET v_found = v_found + ROW_COUNT();
  END IF;
  IF v_found > 0 THEN
    UPDATE email_claim_suppressed_ids x
           STRAIGHT_JOIN email_delivery_attempts a FORCE INDEX (PRIMARY) ON a.id = x.id
       SET a.status = 'Failed',
           a.last_error_code = 'Suppressed',
           a.last_error_message = x.why,
           a.claimed_from_status = NULL,
           a.row_version = a.row_version + 1,
           a.updated_at = {{now}}
     WHERE a.status IN ('Pending', 'Retrying');
    INSERT INTO email_delivery_events
      (attempt_id, occurred_at, from_status, to_status, claim_token, actor, db_account, detail)
    SELECT x.id, {{now}}, x.from_status, 'Failed', NULL, {{actor}}, SESSION_USER(), x.why
      FROM email_claim_suppressed_ids x
     ORDER BY x.id;
    DELETE c FROM email_claim_batch_rows c JOIN email_claim_suppressed_ids x ON x.id = c.id;
  END IF;
END;
