"""Audit events written by the procedures, not by triggers; each event names the calling account.

Why: creating a trigger with the binary log on and log_bin_trust_function_creators=0 needs SUPER
(error 1419), which the admin account of a managed server (RDS, Aurora, Cloud SQL, Azure) never has.
Procedures need no SUPER. Each transition procedure now makes its change and writes its event inside
one unit of work (email_internal_begin / _end / _undo), so the two still commit together, also inside
a caller's transaction for email_enqueue. docs/design.md has the trade-off.

Upgrading a running install: this migration drops the triggers, then `migrate` installs the new
procedures at once. A transition made by an old procedure in between carries no event; stop the
workers during the upgrade (or accept that gap of well under a second). With the binary log on and
log_bin_trust_function_creators=0, DROP TRIGGER needs SUPER as CREATE TRIGGER does (1419): migrate's
preflight refuses such an upgrade before anything changes and names the setting to change.

Idempotent: a migrator killed mid-way runs it again.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import OLD_TRIGGERS, add_column_if_missing

__depends__ = {"0001_schema"}

# MySQL-family DDL commits on its own, which also ends the savepoint yoyo would wrap a step in; a
# failing step then surfaced as `1305 SAVEPOINT sp_N does not exist` instead of its own error. The
# steps are idempotent instead, and run outside a transaction so the server's error reaches the user.
__transactional__ = False


def _drop_old_triggers(conn: Any) -> None:
    cursor = conn.cursor()
    for name in OLD_TRIGGERS:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME = %s",
            (name,),
        )
        if cursor.fetchone()[0]:
            cursor.execute(f"DROP TRIGGER `{name}`")
    cursor.close()


def _add_db_account(conn: Any) -> None:
    # SESSION_USER() as the server reports it: user@client-host, never the definer.
    add_column_if_missing(conn, "email_delivery_events", "db_account", "VARCHAR(300) NULL AFTER actor")


steps = [step(_drop_old_triggers), step(_add_db_account)]
