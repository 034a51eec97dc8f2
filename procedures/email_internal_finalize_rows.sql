-- Internal: email_finalize_batch's set path. When every item of p_outcomes is a well-formed finalize or
-- start mark on a row of its own, the finalizes all end in one email_internal_settle_rows call (one
-- UPDATE and one INSERT of audit events for the whole batch instead of one of each per item, which is
-- most of what a finalize costs the database) and the start marks land in one email_internal_start_rows
-- call. p_done is 1 when it did so (the results are in
-- email_settle_rows: seq, id, landed, to_status); 0 when any item is not exactly such a finalize: then
-- nothing was written, and the caller takes the item-by-item path, which ends each claim the same way
-- and names the first item it refuses. So this path never refuses anything itself, and the rules it
-- checks are email_internal_finalize's and email_finalize_batch's (restated as one predicate per item:
-- the item-by-item path stays their authority, and tests/contract/test_contract_finalize_batch.py
-- holds the two paths to the same rows and events).
CREATE PROCEDURE email_internal_finalize_rows(
  IN p_outcomes LONGTEXT CHARACTER SET utf8mb4,
  OUT p_done INT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_items INT;
  DECLARE v_good INT;
  SET p_done = 0;
  CALL email_internal_settle_rows_clear();
  -- One pass over the document (JSON_TABLE): each item's members, and `usable`, every rule a finalize
  -- item must meet to take this path, judged on the members' own JSON (the values written are cut to
  -- their columns, and trusted only for a usable item). IGNORE: an item repeating another's id is left
  -- out instead of failing the statement, and the count below sees it.
  INSERT IGNORE INTO email_settle_rows
    (seq, id, claim_token, outcome, provider_message_id, error_code, error_message, delay_seconds, usable)
  SELECT o.seq - 1,
         IF(JSON_TYPE(o.m_id) IN ('INTEGER', 'UNSIGNED INTEGER')
            AND CAST(o.m_id AS DECIMAL(30)) BETWEEN 1 AND 9223372036854775807, CAST(o.m_id AS SIGNED), -o.seq),
         LEFT(JSON_UNQUOTE(o.m_claim_token), 64),
         COALESCE(o.step, ''),
         IF(o.step = 'Sent', LEFT(JSON_UNQUOTE(o.m_provider_message_id), 191), NULL),
         IF(o.step = 'UnknownOutcome', 'AmbiguousOutcome', LEFT(JSON_UNQUOTE(NULLIF(o.m_error_code, 'null')), 191)),
         LEFT(JSON_UNQUOTE(NULLIF(o.m_error_message, 'null')), 8000),
         IF(JSON_TYPE(o.m_delay_seconds) IN ('INTEGER', 'UNSIGNED INTEGER')
            AND CAST(o.m_delay_seconds AS DECIMAL(30)) BETWEEN 0 AND 604800, CAST(o.m_delay_seconds AS SIGNED), 0),
         COALESCE(
           JSON_TYPE(o.item) = 'OBJECT'
           -- exactly the known members, each once (a misspelt, repeated or unknown one leaves the count
           -- short), of the right JSON types and values
           AND JSON_LENGTH(o.item) = (o.m_id IS NOT NULL) + (o.m_claim_token IS NOT NULL) + (o.m_outcome IS NOT NULL)
                                     + (o.m_provider_message_id IS NOT NULL) + (o.m_error_code IS NOT NULL)
                                     + (o.m_error_message IS NOT NULL) + (o.m_delay_seconds IS NOT NULL)
           AND JSON_TYPE(o.m_id) IN ('INTEGER', 'UNSIGNED INTEGER')
           AND CAST(o.m_id AS DECIMAL(30)) BETWEEN 1 AND 9223372036854775807
           AND JSON_TYPE(o.m_claim_token) = 'STRING'
           AND CHAR_LENGTH(JSON_UNQUOTE(o.m_claim_token)) BETWEEN 1 AND 64
           AND JSON_TYPE(o.m_outcome) = 'STRING'
           AND o.step IS NOT NULL
           AND COALESCE(JSON_TYPE(o.m_provider_message_id), 'NULL') IN ('STRING', 'NULL')
           AND (o.step <> 'Sent' OR (JSON_TYPE(o.m_provider_message_id) = 'STRING'
                                     AND CHAR_LENGTH(JSON_UNQUOTE(o.m_provider_message_id)) BETWEEN 1 AND 191))
           AND COALESCE(JSON_TYPE(o.m_error_code), 'NULL') IN ('STRING', 'NULL')
           AND COALESCE(CHAR_LENGTH(JSON_UNQUOTE(NULLIF(o.m_error_code, 'null'))), 0) <= 191
           AND COALESCE(JSON_TYPE(o.m_error_message), 'NULL') IN ('STRING', 'NULL')
           -- (a longer message is kept to 8,000 characters: the item-by-item path cuts it)
           AND COALESCE(CHAR_LENGTH(JSON_UNQUOTE(NULLIF(o.m_error_message, 'null'))), 0) <= 8000
           AND COALESCE(JSON_TYPE(o.m_delay_seconds), 'NULL') IN ('INTEGER', 'UNSIGNED INTEGER', 'NULL')
           AND (COALESCE(JSON_TYPE(o.m_delay_seconds), 'NULL') = 'NULL'
                OR CAST(o.m_delay_seconds AS DECIMAL(30)) BETWEEN 0 AND 604800),
           0)
    FROM (
      SELECT j.*,
             -- the current names only: a deprecated alias takes the item-by-item path
             CASE CAST(JSON_UNQUOTE(j.m_outcome) AS BINARY)
               WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' WHEN 'Retrying' THEN 'Retrying'
               WHEN 'UnknownOutcome' THEN 'UnknownOutcome' WHEN 'Released' THEN 'Released'
               WHEN 'Started' THEN 'Started'
             END AS step
        FROM JSON_TABLE(p_outcomes, '$[*]' COLUMNS (
               seq FOR ORDINALITY,
               item JSON PATH '$',
               -- each member's own JSON (NULL when absent; 'null' for a JSON null)
               m_id JSON PATH '$.id',
               m_claim_token JSON PATH '$.claim_token',
               m_outcome JSON PATH '$.outcome',
               m_provider_message_id JSON PATH '$.provider_message_id',
               m_error_code JSON PATH '$.error_code',
               m_error_message JSON PATH '$.error_message',
               m_delay_seconds JSON PATH '$.delay_seconds')) j
    ) o;
  SELECT COUNT(*), SUM(usable) INTO v_items, v_good FROM email_settle_rows;
  IF v_items = JSON_LENGTH(p_outcomes) AND v_good = v_items THEN
    CALL email_internal_settle_rows(NULL);
    CALL email_internal_start_rows();
    SET p_done = 1;
  END IF;
END
