-- A start mark that did not land: a reservation past its expires_at is not started but ends Failed
-- 'Expired' here, audited, never sent (anything else is left as it is). Inside the caller's unit of
-- work. {{scratch}}: a VARCHAR(20) variable of the caller's that end_unsent may overwrite (the status
-- the row left), so no variable is declared for it.
{{>end_unsent | id = {{id}} | now = {{now}} | code = 'Expired' | why = NULL | actor = 'start-check' | expired_only = 1 | from_status = {{scratch}}}}
