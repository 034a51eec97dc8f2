-- The size of a row's bodies, text and HTML together, in bytes (`body_bytes` of the claim row shape).
COALESCE(LENGTH(a.text_body), 0) + COALESCE(LENGTH(a.html_body), 0)
