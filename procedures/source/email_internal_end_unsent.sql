-- Internal: the end of a row that was never handed to SES (procedures/source/fragments/end_unsent.sql),
-- for the callers that are not generated from procedures/source/ (the cancel) and the sweeps that
-- CALL it per row. Runs inside the caller's unit of work. p_expired_only 1: only a row whose
-- expires_at has passed by p_now. p_from_status: the status it left (NULL: nothing changed).
CREATE PROCEDURE email_internal_end_unsent(
  IN p_id BIGINT UNSIGNED,
  IN p_now DATETIME(6),
  IN p_code VARCHAR(20) CHARACTER SET utf8mb4,
  IN p_why TEXT CHARACTER SET utf8mb4,
  IN p_actor VARCHAR(191) CHARACTER SET utf8mb4,
  IN p_expired_only TINYINT,
  OUT p_from_status VARCHAR(20) CHARACTER SET utf8mb4
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  {{>end_unsent | id = p_id | now = p_now | code = p_code | why = p_why | actor = p_actor | expired_only = p_expired_only | from_status = p_from_status}}
END
