-- Retention in keyset batches: clears the bodies and attachments of up to limit Sent and Failed rows
-- last changed more than older_than_days ago, with an id above after_id (0 to start); the row and its
-- notification_id stay, so a late duplicate enqueue is still recognised, and UnknownOutcome rows keep
-- their bodies (an operator may still requeue them). Pass the last_id of one call as the after_id of
-- the next; stop when affected < limit. No row is scanned twice, so a whole purge is linear in the
-- table. Result: affected, last_id.
CREATE PROCEDURE email_purge_bodies_after(
  IN p_older_than_days BIGINT,
  IN p_after_id BIGINT,
  IN p_limit BIGINT
)
MODIFIES SQL DATA
SQL SECURITY DEFINER
BEGIN
  DECLARE v_affected BIGINT DEFAULT 0;
  DECLARE v_last_id BIGINT DEFAULT 0;
  CALL email_internal_purge_bodies('email_purge_bodies_after', p_older_than_days, p_after_id, p_limit,
                                   v_affected, v_last_id);
  SELECT v_affected AS affected, v_last_id AS last_id;
END
