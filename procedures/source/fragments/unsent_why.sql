-- Why a row never handed to SES ended (end_unsent), read from its row: {{why}}, or when NULL the
-- expiry's own text.
COALESCE({{why}}, CONCAT('expired: not sent by its expires_at ', DATE_FORMAT(expires_at, '%Y-%m-%d %H:%i:%s.%f'), ' UTC'))
