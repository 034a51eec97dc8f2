-- The exit handler of a procedure that opens a unit of work: undo this call's writes and re-raise
-- the same error (a deadlock is never swallowed). Declared after the procedure's variables; {{own}}
-- is its INT variable DEFAULT NULL that unit_begin sets.
DECLARE EXIT HANDLER FOR SQLEXCEPTION
BEGIN
  {{>unit_undo | own = {{own}}}}
  RESIGNAL;
END;
