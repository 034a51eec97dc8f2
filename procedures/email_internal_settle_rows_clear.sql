-- Internal: an empty email_settle_rows, the session's working table of claims to end together
-- (email_internal_settle_rows says what each column means); a session's copy is its own. The server's
-- default engine for temporary tables (InnoDB): MEMORY stores every VARCHAR at its full width, and
-- copying rows of 40 KB cost more than the rows' own change.
CREATE PROCEDURE email_internal_settle_rows_clear()
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  CREATE TEMPORARY TABLE IF NOT EXISTS email_settle_rows (
    seq INT NOT NULL PRIMARY KEY,
    id BIGINT NOT NULL,
    claim_token VARCHAR(64) CHARACTER SET utf8mb4 NULL,
    outcome VARCHAR(20) CHARACTER SET utf8mb4 NOT NULL,
    provider_message_id VARCHAR(191) CHARACTER SET utf8mb4 NULL,
    error_code VARCHAR(191) CHARACTER SET utf8mb4 NULL,
    error_message TEXT CHARACTER SET utf8mb4 NULL,
    delay_seconds BIGINT NOT NULL DEFAULT 0,
    actor VARCHAR(191) CHARACTER SET utf8mb4 NULL,
    detail TEXT CHARACTER SET utf8mb4 NULL,
    usable TINYINT NOT NULL DEFAULT 1,
    landed TINYINT NOT NULL DEFAULT 0,
    to_status VARCHAR(20) CHARACTER SET utf8mb4 NULL,
    UNIQUE KEY (id)
  );
  DELETE FROM email_settle_rows;
END
