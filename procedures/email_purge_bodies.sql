-- Retention: clear the bodies of Sent and Failed rows last changed more than older_than_days ago.
-- The row and its notification_id stay, so a late duplicate enqueue is still recognised.
-- UnknownOutcome rows keep their bodies: an operator may still requeue them. Result: affected.
-- Each call scans from the start of the table: to purge a large table, use email_purge_bodies_after.
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
