-- Internal: the key an address is compared by on the suppression list, the way mail systems compare
-- addresses: the local part exactly, the domain case-insensitively. 'Ann@Example.COM' ->
-- 'Ann@example.com'. Split at the last @. NULL stays NULL. (A procedure, not a function: creating
-- functions with the binary log on needs SUPER.)
CREATE PROCEDURE email_internal_address_key(
  IN p_address TEXT CHARACTER SET utf8mb4,
  OUT p_key VARCHAR(320) CHARACTER SET utf8mb4
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  SET p_key = IF(p_address IS NULL, NULL,
    CONCAT(LEFT(p_address, CHAR_LENGTH(p_address) - CHAR_LENGTH(SUBSTRING_INDEX(p_address, '@', -1)) - 1),
           '@', LOWER(SUBSTRING_INDEX(p_address, '@', -1))));
END
