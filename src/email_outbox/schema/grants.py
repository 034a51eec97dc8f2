"""Least-privilege grants: three roles, each a list of procedures it may EXECUTE (and, for operators,
SELECT on the two tables). No role gets a table write privilege: every procedure runs SQL SECURITY
DEFINER, so the procedures are the only door to a change.

Direct grants to accounts rather than SQL roles, because MySQL 8 and MariaDB differ on roles (default
roles, SET ROLE) and a direct grant behaves the same on both (docs/design.md section 5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from email_outbox.errors import AccountExists, AccountMissing, InvalidInput

# A service cancels its own emails (email_cancel, scoped to the calling account) as it enqueues them;
# never email_cancel_email, which reaches any account's email by row id.
# email_changes: the feed of what happened to the calling account's own emails (its status changes and
# SES events), so the service that enqueued can react to a bounce or a delivery.
ENQUEUER_PROCEDURES = ("email_enqueue", "email_enqueue_message", "email_cancel", "email_changes")

WORKER_PROCEDURES = (
    "email_claim_batch",
    "email_claim_batch_bounded",
    # Deprecated (the old name of email_claim_batch_bounded): granted for this release only.
    "email_reserve_batch",
    "email_start_send",
    "email_claimed_bodies",
    "email_claimed_attachments",
    "email_claimable_candidates",
    "email_try_claim",
    "email_sweep_stale_leases",
    "email_extend_lease",
    "email_finalize_sent",
    "email_finalize_failure",
    "email_finalize_unknown",
    "email_release_claim",
    "email_finalize_batch",
    "email_finalize_and_start",
    # The queue-depth gauge of /metrics, its count of emails failed unsent (expired, cancelled), and
    # when retention last finished (the alert on retention not run).
    "email_outbox_queue_stats",
    "email_unsent_failure_stats",
    "email_retention_last_run",
    # The start-up check that the default sender is allowed.
    "email_sender_allowed",
    # The provider breaker shared by every replica (docs/design.md, "Provider outages").
    "email_breaker_state",
    "email_breaker_open",
    "email_breaker_try_probe",
    "email_breaker_close",
    # The SES account's send rate and daily quota, shared by every replica.
    "email_send_rate_take",
    "email_send_rate_report",
    "email_send_rate_throttled",
    "email_send_rate_status",
    # SES's sending status per tenant: read in turns (GetTenant), and a tenant SES paused.
    "email_tenant_status_due",
    "email_tenant_sending_paused",
    # The outbox's own reputation guard per tenant, and the tenants' gauges of /metrics.
    "email_tenant_guard",
    "email_tenant_stats",
)

# `email-outbox retention` and `erase` (a scheduler's account, or a DBA's): deletes old emails and
# erases an address. Operators have both too; the enqueuer, worker, events, viewer and console roles
# have neither.
MAINTENANCE_PROCEDURES = ("email_retention", "email_retention_preview", "email_erase_address")

OPERATOR_PROCEDURES = (
    "email_requeue_unknown_outcome",
    "email_resolve_unknown_outcome",
    "email_outbox_stats",
    "email_outbox_queue_stats",
    "email_purge_bodies_after",
    # Deprecated (email_purge_bodies_after with after_id 0): granted for this release only.
    "email_sweep_stale_leases",
    # `email-outbox enqueue`, the ad-hoc send, and `enqueue --json`.
    "email_enqueue",
    "email_enqueue_message",
    # The feed of the operator account's own ad-hoc sends (`email-outbox changes`).
    "email_changes",
    # `email-outbox cancel` (by row id, any account's email) and the operator's own ad-hoc sends.
    "email_cancel",
    "email_cancel_email",
    # `email-outbox senders`.
    "email_sender_add",
    "email_sender_remove",
    "email_sender_allowed",
    # `email-outbox tenants`, and the tenants of `status`.
    "email_tenant_stats",
    "email_tenant_add",
    "email_tenant_set",
    "email_tenant_remove",
    "email_tenant_pause",
    "email_tenant_resume",
    # `email-outbox configuration-sets`.
    "email_configuration_set_add",
    "email_configuration_set_remove",
    # `email-outbox suppression` and the SES figures of `status`.
    "email_suppression_add",
    "email_suppression_remove",
    "email_provider_stats",
    *MAINTENANCE_PROCEDURES,
    # `email-outbox erasure-key rotate`: adds a key, never reads one.
    "email_erasure_key_rotate",
    # `email-outbox redrive` and the provider line of `status`.
    "email_redrive_failed",
    "email_redrive_email",
    "email_redrive_failed_batch",
    "email_breaker_state",
    # `email-outbox breaker close`: a breaker a worker opened (or a replica's account opened on purpose)
    # is closed by a person at once, not after the next probe.
    "email_breaker_close",
    "email_unsent_failure_stats",
    "email_retention_last_run",
    # The send rate and daily quota of `status` and the console.
    "email_send_rate_status",
)

# `email-outbox events`: records SES events, settles UnknownOutcome rows from their evidence, and
# reads the 24-hour rates for its /metrics. It cannot claim, send, requeue or read a table.
EVENTS_PROCEDURES = (
    "email_record_provider_event",
    "email_resolve_unknown_from_evidence",
    "email_provider_stats",
)

OPERATOR_TABLES = (
    "email_delivery_attempts",
    "email_attachments",
    "email_delivery_events",
    "email_allowed_senders",
    "email_allowed_senders_log",
    "email_allowed_configuration_sets",
    "email_allowed_configuration_sets_log",
    "email_provider_events",
    "email_delivery_status",
    "email_suppressed_addresses",
    "email_suppressed_addresses_log",
    # The tenants, who may use them, and every change to them.
    "email_tenants",
    "email_tenant_accounts",
    "email_tenants_log",
    # The release that last migrated the database, for `status`.
    "email_outbox_release",
)

# A read-only look at the outbox (the web console's read-only page, dashboards): the operator's
# tables, the two counting procedures, the provider breaker's state and the account's send rate; no
# change of any kind.
VIEWER_PROCEDURES = (
    "email_outbox_stats",
    "email_outbox_queue_stats",
    "email_breaker_state",
    "email_send_rate_status",
    # The tenants of the overview.
    "email_tenant_stats",
)

# The web console that acts: what a viewer has, and the three actions its pages offer. Not the rest of
# the operator's set (enqueue, the allow-list, suppression, purge): a console, or its DSN file, in the
# wrong hands cannot send mail or change who may.
CONSOLE_ACTIONS = (
    "email_requeue_unknown_outcome",
    "email_resolve_unknown_outcome",
    "email_redrive_failed",
    # The redrive by row id (issue 37): a console granted before it calls it once granted again.
    "email_redrive_email",
)
# The console's cancel action on Pending and Retrying emails. Apart from CONSOLE_ACTIONS: a console
# account granted before it existed keeps its other actions, and offers cancel once granted again.
CONSOLE_CANCEL = "email_cancel_email"
# The overview's "close the provider breaker" (an operator ends an outage hold at once). Apart for the
# same reason: a console granted before it keeps its other actions.
CONSOLE_BREAKER_CLOSE = "email_breaker_close"
CONSOLE_PROCEDURES = (*VIEWER_PROCEDURES, *CONSOLE_ACTIONS, CONSOLE_CANCEL, CONSOLE_BREAKER_CLOSE)

ROLES: dict[str, tuple[str, ...]] = {
    "enqueuer": ENQUEUER_PROCEDURES,
    "worker": WORKER_PROCEDURES,
    "operator": OPERATOR_PROCEDURES,
    "events": EVENTS_PROCEDURES,
    "maintenance": MAINTENANCE_PROCEDURES,
    "viewer": VIEWER_PROCEDURES,
    "console": CONSOLE_PROCEDURES,
}
# The roles that read the tables directly.
READER_ROLES = ("operator", "viewer", "console")
# The release that last migrated the database: a worker warns at start when it is not this package's.
WORKER_TABLES = ("email_outbox_release",)

# user@host as MySQL spells an account; the host part defaults to '%'.
_ACCOUNT = re.compile(r"^'?(?P<user>[^'@]{1,80})'?(?:@'?(?P<host>[^'@]{1,255})'?)?$")


@dataclass(frozen=True)
class Account:
    user: str
    host: str = "%"

    @classmethod
    def parse(cls, text: str) -> Account:
        match = _ACCOUNT.match(text.strip())
        if not match:
            raise InvalidInput(f"account must be user or user@host (got {text!r})")
        return cls(match.group("user"), match.group("host") or "%")

    def sql(self) -> str:
        return f"{_quote_string(self.user)}@{_quote_string(self.host)}"

    def __str__(self) -> str:
        return f"{self.user}@{self.host}"


def _quote_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _quote_ident(value: str) -> str:
    return "`" + value.replace("`", "``") + "`"


def grant_statements(role: str, account: Account, database: str) -> list[str]:
    """The GRANT statements that give `account` exactly `role`'s privileges on `database`."""
    if role not in ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ROLES)} (got {role!r})")
    db = _quote_ident(database)
    statements = [
        f"GRANT EXECUTE ON PROCEDURE {db}.{_quote_ident(name)} TO {account.sql()}" for name in ROLES[role]
    ]
    if role in READER_ROLES:
        statements += [f"GRANT SELECT ON {db}.{_quote_ident(t)} TO {account.sql()}" for t in OPERATOR_TABLES]
    if role == "worker":
        statements += [f"GRANT SELECT ON {db}.{_quote_ident(t)} TO {account.sql()}" for t in WORKER_TABLES]
    return statements


def apply_grants(
    cursor: Any,
    role: str,
    account: Account,
    database: str,
    *,
    create_password: str | None = None,
) -> list[str]:
    """Run the grants (creating the account first when a password is given). Returns what ran.

    Without a password a GRANT must never create the account: MariaDB without NO_AUTO_CREATE_USER
    (and MySQL 5.7) would create it with no password at all. So the session refuses auto-creation
    where the server knows the mode (MySQL 8 never auto-creates), and a missing account is an error.
    """
    statements = []
    if create_password is not None:
        if not create_password:
            raise InvalidInput("refusing to create an account with an empty password")
        # Not IF NOT EXISTS: an existing account (perhaps one with no password) kept silently would look
        # like one just made with the password given.
        try:
            cursor.execute(f"CREATE USER {account.sql()} IDENTIFIED BY %s", (create_password,))
        except Exception as exc:
            if getattr(exc, "errno", None) == ER_CANNOT_USER:
                raise AccountExists(
                    f"account {account} already exists: --create makes a new account only; to give it the"
                    " role, run grant without --create (its password is left as it is)"
                ) from exc
            raise
        statements.append(f"CREATE USER {account.sql()} IDENTIFIED BY '***'")
    else:
        _forbid_auto_create(cursor)
    for statement in grant_statements(role, account, database):
        try:
            cursor.execute(statement)
        except Exception as exc:
            if getattr(exc, "errno", None) in ACCOUNT_MISSING_ERRNOS:
                raise AccountMissing(
                    f"account {account} does not exist: create it first, or pass --create"
                    " (the password from --password-stdin or --password-env)"
                ) from exc
            raise
        statements.append(statement)
    return statements


# 1396: CREATE USER failed, the account exists.
ER_CANNOT_USER = 1396
# 1133: no matching row in the user table (MariaDB with NO_AUTO_CREATE_USER); 1410: MySQL 8's refusal
# to create a user with GRANT.
ACCOUNT_MISSING_ERRNOS = frozenset({1133, 1410})


def _forbid_auto_create(cursor: Any) -> None:
    cursor.execute("SELECT @@SESSION.sql_mode, VERSION()")
    row = cursor.fetchall()[0]
    mode, version = (row["@@SESSION.sql_mode"], row["VERSION()"]) if isinstance(row, dict) else row
    if "mariadb" in str(version).lower() and "NO_AUTO_CREATE_USER" not in str(mode).split(","):
        cursor.execute(
            "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'NO_AUTO_CREATE_USER')"
        )
