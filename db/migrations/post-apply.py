"""Runs after every `migrate`: brings the stored procedures in line with procedures/*.sql, then records
this package's version as the database's (email_outbox_release).

Only routines whose definition differs are replaced, so re-running on an up-to-date database changes
nothing and never leaves a moment with a procedure missing.
"""

from yoyo import step

from email_outbox.schema.release import record_release_step
from email_outbox.schema.routines import sync_procedures_step

# MySQL-family DDL commits on its own, which also ends the savepoint yoyo would wrap a step in; a
# failing step then surfaced as `1305 SAVEPOINT sp_N does not exist` instead of its own error. The
# steps are idempotent instead, and run outside a transaction so the server's error reaches the user.
__transactional__ = False

steps = [step(sync_procedures_step), step(record_release_step)]
