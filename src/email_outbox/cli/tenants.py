"""`email-outbox tenants list|add|set|remove|pause|resume`: the services sharing the outbox, each with
its share of sends, its limits and its SES tenant (docs/design.md, "Tenants").

Every change goes through a procedure (email_tenant_*) that logs who, from which database account,
when and why, in email_tenants_log.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, open_repository
from email_outbox.db.repository import OutboxRepository
from email_outbox.display import print_json, table, visible
from email_outbox.errors import InvalidInput

# A flag that clears a limit: `--send-rate none`.
NONE = "none"


def cmd_tenants(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        if args.action == "list":
            return _list(repo, as_json=args.json)
        if args.action in ("add", "set"):
            settings = _settings(args)
            if args.action == "add":
                done = repo.tenant_add(args.name, settings, args.by, args.reason)
                print(visible(f"{'added' if done else 'already exists'}: tenant {args.name}"))
            else:
                done = repo.tenant_set(args.name, settings, args.by, args.reason)
                print(visible(f"{'changed' if done else 'no such tenant'}: tenant {args.name}"))
            return EXIT_OK if done else EXIT_NOTHING
        if args.action == "remove":
            done = repo.tenant_remove(args.name, args.by, args.reason)
            print(visible(f"{'removed' if done else 'no such tenant'}: tenant {args.name}"))
            return EXIT_OK if done else EXIT_NOTHING
        if args.action == "pause":
            done = repo.tenant_pause(args.name, args.by, args.reason)
            print(visible(f"{'paused' if done else 'no such tenant, or already paused'}: tenant {args.name}"))
            return EXIT_OK if done else EXIT_NOTHING
        resumed = repo.tenant_resume(args.name, args.by, args.reason)
        held = ", ".join(
            part
            for part in (
                f"paused ({resumed.paused_reason})" if resumed.paused_reason else "",
                f"guard below priority {resumed.guard_below_priority}"
                if resumed.guard_below_priority is not None
                else "",
            )
            if part
        )
        print(
            visible(
                f"resumed, lifted {held}: tenant {args.name}"
                if resumed.affected
                else f"nothing held tenant {args.name}"
            )
        )
        return EXIT_OK if resumed.affected else EXIT_NOTHING


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings document of the flags given: only those change (`set`)."""
    settings: dict[str, Any] = {}
    for flag, member, kind in (
        ("weight", "weight", int),
        ("max_priority", "max_priority", int),
        ("send_rate", "send_rate", float),
        ("daily_quota", "daily_quota", int),
        ("max_waiting_rows", "max_waiting_rows", int),
        ("ses_tenant", "ses_tenant_name", str),
    ):
        value = getattr(args, flag)
        if value is not None:
            settings[member] = None if value == NONE else _typed(value, kind, flag)
    if args.account:
        settings["accounts"] = list(args.account)
    if args.default_for:
        settings["default_for"] = list(args.default_for)
    return settings


def _typed(value: str, kind: type, flag: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        what = "a number" if kind is float else "an integer" if kind is int else "text"
        raise InvalidInput(f"--{flag.replace('_', '-')} must be {what} or {NONE}: {value!r}") from None


def _list(repo: OutboxRepository, *, as_json: bool) -> int:
    tenants = repo.tenants()
    if as_json:
        print_json([asdict(t) for t in tenants])
        return EXIT_OK
    print(
        table(
            [
                "tenant",
                "weight",
                "max prio",
                "rate/s",
                "daily",
                "waiting cap",
                "SES tenant",
                "accounts",
                "held",
            ],
            [
                [
                    t.name,
                    t.weight,
                    t.max_priority,
                    "-" if t.send_rate is None else f"{t.send_rate:g}",
                    "-" if t.daily_quota is None else f"{t.day_count}/{t.daily_quota}",
                    t.max_waiting_rows or "-",
                    t.ses_tenant_name or "-",
                    ", ".join(f"{a}{' (default)' if a in t.default_for else ''}" for a in t.accounts) or "-",
                    _held(t.paused_reason, t.guard_below_priority),
                ]
                for t in tenants
            ],
        )
    )
    return EXIT_OK


def _held(paused_reason: str | None, guard_below_priority: int | None) -> str:
    if paused_reason:
        return f"paused ({paused_reason})"
    if guard_below_priority is not None:
        return f"guard: below priority {guard_below_priority} waits"
    return "-"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tenants", help="the services sharing the outbox: shares, limits, SES tenants")
    actions = p.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every tenant, its settings and what holds it")
    add_dsn(listing)
    listing.add_argument("--json", action="store_true")
    for name, verb in (("add", "add a tenant"), ("set", "change a tenant's settings (only those given)")):
        change = actions.add_parser(name, help=verb)
        add_dsn(change)
        change.add_argument("name", help="1 to 64 of A-Za-z0-9_- (SES's rule)")
        change.add_argument(
            "--weight", help="its share of sends among tenants with due rows (1-1000; default 1)"
        )
        change.add_argument("--max-priority", help="the highest priority its messages may ask for (0-9)")
        change.add_argument("--send-rate", help=f"sends per second at most ({NONE}: the account's)")
        change.add_argument("--daily-quota", help=f"sends per 24 hours at most ({NONE}: the account's)")
        change.add_argument(
            "--max-waiting-rows", help=f"refuse enqueues past this many waiting rows ({NONE}: no cap)"
        )
        change.add_argument("--ses-tenant", help=f"SES's tenant name: sends carry TenantName ({NONE}: none)")
        change.add_argument(
            "--account",
            action="append",
            help="a database user name that may use it, * for all (repeat; replaces)",
        )
        change.add_argument(
            "--default-for",
            action="append",
            help="an account whose messages naming no tenant go to it (repeat)",
        )
        change.add_argument("--by", required=True, help="your name, written to the log")
        change.add_argument("--reason", required=True, help="why, written to the log")
    for name, verb in (
        ("remove", "remove a tenant with no waiting rows"),
        ("pause", "pause a tenant's sends (its rows wait, no attempt used)"),
        ("resume", "lift a pause (any cause) and the reputation guard"),
    ):
        change = actions.add_parser(name, help=verb)
        add_dsn(change)
        change.add_argument("name")
        change.add_argument("--by", required=True, help="your name, written to the log")
        change.add_argument("--reason", required=True, help="why, written to the log")
    p.set_defaults(func=cmd_tenants)
