-- Internal: open the unit of work that makes a transition and its audit event commit together, for
-- the procedures that CALL it (the send path's procedures include the fragment unit_begin instead:
-- procedures/source/fragments/unit_begin.sql says how the two cases are told apart). p_own = 1: our
-- own transaction, which email_internal_end commits; 0: inside the caller's, under a savepoint.
CREATE PROCEDURE email_internal_begin(
  OUT p_own INT
)
NO SQL
SQL SECURITY DEFINER
BEGIN
  {{>unit_begin | own = p_own}}
END
