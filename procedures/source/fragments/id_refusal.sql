-- A CASE branch: the id rule of every call that names a row (a positive integer), as a refusal
-- (`refuse` says how a refusal is spelled). IS NOT TRUE: NULL is refused too, in one test.
WHEN ({{id}} >= 1) IS NOT TRUE THEN '45001: id must be a positive integer'
