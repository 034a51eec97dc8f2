-- A CASE branch: the id rule of every call that names a row (a positive integer), as a refusal
-- (`refuse` says how a refusal is spelled).
WHEN {{id}} IS NULL OR {{id}} < 1 THEN '45001: id must be a positive integer'
