-- A start mark that did not land: a reservation past its expires_at is not started but ends Failed
-- 'Expired' here, audited, never sent (anything else is left as it is). Inside the caller's unit of
-- work; rare, so it calls the one writer of an unsent end.
BEGIN
  DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4;
  CALL email_internal_end_unsent({{id}}, {{now}}, 'Expired', NULL, 'start-check', 1, v_from);
END;
