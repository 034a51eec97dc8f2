-- Internal: apply a tenant's settings document (email_tenant_add, email_tenant_set) to tenant p_id,
-- inside the caller's transaction: only the members given change; JSON null clears a limit. Members:
-- weight (1 to 1000), max_priority (0 to 9), send_rate (sends per second, above 0, at most 100000),
-- daily_quota (1 or more), max_waiting_rows (0 or more), ses_tenant_name (SES's name rule), accounts
-- (the database user names that may use it, '*' for every account: replaces the list), default_for
-- (accounts whose messages naming no tenant go to it: each moves its default here). Refuses an
-- unknown member (45002) and a bad value (45001) naming it.
CREATE PROCEDURE email_internal_tenant_apply(
  IN p_where VARCHAR(64) CHARACTER SET utf8mb4,
  IN p_id INT UNSIGNED,
  IN p_settings LONGTEXT CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_message VARCHAR(300) CHARACTER SET utf8mb4;
  DECLARE v_keys, v_list LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_key, v_type, v_account VARCHAR(300) CHARACTER SET utf8mb4;
  DECLARE v_value LONGTEXT CHARACTER SET utf8mb4;
  DECLARE v_i, v_n INT DEFAULT 0;

  IF p_settings IS NULL OR JSON_VALID(p_settings) = 0 OR JSON_TYPE(p_settings) <> 'OBJECT' THEN
    SET v_message = CONCAT(p_where, ': settings must be a JSON object');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
  END IF;
  SET v_keys = JSON_KEYS(p_settings), v_n = JSON_LENGTH(v_keys);
  IF JSON_LENGTH(p_settings) <> v_n THEN
    SET v_message = CONCAT(p_where, ': settings must not give a member twice');
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
  END IF;
  WHILE v_i < v_n DO
    SET v_key = JSON_UNQUOTE(JSON_EXTRACT(v_keys, CONCAT('$[', v_i, ']')));
    SET v_value = JSON_EXTRACT(p_settings, CONCAT('$.', JSON_QUOTE(v_key)));
    SET v_type = JSON_TYPE(v_value);
    SET v_i = v_i + 1;
    IF v_key = 'weight' THEN
      IF v_type NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR CAST(v_value AS SIGNED) NOT BETWEEN 1 AND 1000 THEN
        SET v_message = CONCAT(p_where, ': weight must be an integer from 1 to 1000');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      UPDATE email_tenants SET weight = CAST(v_value AS SIGNED) WHERE id = p_id;
    ELSEIF v_key = 'max_priority' THEN
      IF v_type NOT IN ('INTEGER', 'UNSIGNED INTEGER') OR CAST(v_value AS SIGNED) NOT BETWEEN 0 AND 9 THEN
        SET v_message = CONCAT(p_where, ': max_priority must be an integer from 0 to 9');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      UPDATE email_tenants SET max_priority = CAST(v_value AS SIGNED) WHERE id = p_id;
    ELSEIF v_key = 'send_rate' THEN
      IF v_type <> 'NULL' AND (v_type NOT IN ('INTEGER', 'UNSIGNED INTEGER', 'DOUBLE', 'DECIMAL')
                               OR CAST(v_value AS DOUBLE) <= 0 OR CAST(v_value AS DOUBLE) > 100000) THEN
        SET v_message = CONCAT(p_where, ': send_rate must be null or sends per second above 0, at most 100000');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      UPDATE email_tenants SET send_rate = IF(v_type = 'NULL', NULL, CAST(v_value AS DOUBLE)), rate_next_at = NULL
       WHERE id = p_id;
    ELSEIF v_key IN ('daily_quota', 'max_waiting_rows') THEN
      -- A cap of 0 waiting rows closes a tenant to new mail and lets what it has go out.
      IF v_type <> 'NULL' AND (v_type NOT IN ('INTEGER', 'UNSIGNED INTEGER')
                               OR CAST(v_value AS SIGNED) < IF(v_key = 'daily_quota', 1, 0)) THEN
        SET v_message = CONCAT(p_where, ': ', v_key, ' must be null or an integer of ',
                               IF(v_key = 'daily_quota', 1, 0), ' or more');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
      END IF;
      IF v_key = 'daily_quota' THEN
        UPDATE email_tenants SET daily_quota = IF(v_type = 'NULL', NULL, CAST(v_value AS SIGNED)) WHERE id = p_id;
      ELSE
        UPDATE email_tenants SET max_waiting_rows = IF(v_type = 'NULL', NULL, CAST(v_value AS SIGNED)) WHERE id = p_id;
      END IF;
    ELSEIF v_key = 'ses_tenant_name' THEN
      IF v_type <> 'NULL' AND v_type <> 'STRING' THEN
        SET v_message = CONCAT(p_where, ': ses_tenant_name must be null or a string');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
      END IF;
      IF v_type = 'STRING' THEN
        CALL email_internal_check_tenant_name(p_where, 'ses_tenant_name', JSON_UNQUOTE(v_value));
      END IF;
      UPDATE email_tenants
         SET ses_tenant_name = IF(v_type = 'NULL', NULL, JSON_UNQUOTE(v_value)),
             ses_sending_status = NULL, ses_checked_at = NULL
       WHERE id = p_id;
    ELSEIF v_key IN ('accounts', 'default_for') THEN
      IF v_type <> 'ARRAY' OR JSON_LENGTH(v_value) > 1000 THEN
        SET v_message = CONCAT(p_where, ': ', v_key, ' must be a list of at most 1000 account names');
        SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
      END IF;
      SET v_list = v_value;
      IF v_key = 'accounts' THEN
        -- Replaced, defaults kept for the accounts still on it.
        DELETE FROM email_tenant_accounts
         WHERE tenant_id = p_id AND JSON_CONTAINS(v_list, JSON_QUOTE(account)) = 0;
      END IF;
      BEGIN
        DECLARE v_j INT DEFAULT 0;
        WHILE v_j < JSON_LENGTH(v_list) DO
          IF JSON_TYPE(JSON_EXTRACT(v_list, CONCAT('$[', v_j, ']'))) <> 'STRING' THEN
            SET v_message = CONCAT(p_where, ': ', v_key, ' must be a list of account names (strings)');
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
          END IF;
          SET v_account = JSON_UNQUOTE(JSON_EXTRACT(v_list, CONCAT('$[', v_j, ']')));
          SET v_j = v_j + 1;
          IF v_account IS NULL OR CHAR_LENGTH(v_account) < 1 OR CHAR_LENGTH(v_account) > 80
             OR LOCATE('@', v_account) > 0 OR (v_key = 'default_for' AND v_account = '*') THEN
            SET v_message = CONCAT(p_where, ': ', v_key,
                                   ' must list database user names (no @host), 1 to 80 characters',
                                   IF(v_key = 'accounts', ', or *', ''));
            SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45001, MESSAGE_TEXT = v_message;
          END IF;
          CALL email_internal_check_text(p_where, v_key, v_account, 'text');
          IF v_key = 'accounts' THEN
            INSERT IGNORE INTO email_tenant_accounts (account, tenant_id) VALUES (v_account, p_id);
          ELSE
            UPDATE email_tenant_accounts SET is_default = 0 WHERE account = v_account AND tenant_id <> p_id;
            INSERT INTO email_tenant_accounts (account, tenant_id, is_default) VALUES (v_account, p_id, 1)
            ON DUPLICATE KEY UPDATE is_default = 1;
          END IF;
        END WHILE;
      END;
    ELSE
      SET v_message = CONCAT(p_where, ': unknown member ', LEFT(JSON_QUOTE(v_key), 80),
        ' (weight, max_priority, send_rate, daily_quota, max_waiting_rows, ses_tenant_name, accounts, default_for)');
      SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = 45002, MESSAGE_TEXT = v_message;
    END IF;
  END WHILE;
END
