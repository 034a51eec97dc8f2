-- Deprecated: email_purge_bodies_after with after_id 0 (one purge procedure; docs/procedures.md,
-- "Versions"). Kept for one release as a thin wrapper of the same retention loop, so callers still
-- using it keep working; the next release's migration drops it. Each call scans from the start of
-- the table. Result: affected.
CREATE PROCEDURE email_purge_bodies(
  IN p_older_than_days BIGINT,
  IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_last_id BIGINT DEFAULT 0;
  CALL email_internal_purge_bodies('email_purge_bodies', p_older_than_days, 0, p_limit, v_affected, v_last_id);
  SELECT v_affected AS affected;
END
