-- HMAC-SHA256 (RFC 2104) of a message under an erasure key, in hex: the key table email_outbox_keys
-- holds each key's inner and outer pads (the key XORed with ipad and opad, stored generated columns,
-- migration 0018). {{message}}: the message, a binary string (CONVERT ... USING utf8mb4 of the text).
-- {{keys}}: the key table's alias and a dot (`k.`), or nothing when it is the statement's only table.
SHA2(CONCAT({{keys}}outer_pad, UNHEX(SHA2(CONCAT({{keys}}inner_pad, {{message}}), 256))), 256)
