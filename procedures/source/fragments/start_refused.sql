-- A start mark that did not land: a reservation past its expires_at is not started but ends Failed
-- 'Expired' here, audited, never sent (anything else is left as it is). Inside the caller's unit of
-- work.
BEGIN
  DECLARE v_from VARCHAR(20) CHARACTER SET utf8mb4;
  {{>end_unsent | id = {{id}} | now = {{now}} | code = 'Expired' | why = NULL | actor = 'start-check' | expired_only = 1 | from_status = v_from}}
END;
