"""Runs after every `migrate`: brings the stored procedures in line with procedures/*.sql.

Only routines whose definition differs are replaced, so re-running on an up-to-date database changes
nothing and never leaves a moment with a procedure missing.
"""

from email_outbox.routines import sync_procedures_step
from yoyo import step

steps = [step(sync_procedures_step)]
