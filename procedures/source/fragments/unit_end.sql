-- Close what unit_begin opened: commit our own transaction, or leave the caller's open (the savepoint
-- goes with it).
IF {{own}} = 1 THEN
  COMMIT;
END IF;
