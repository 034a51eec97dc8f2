"""What an operator reads: `email-outbox status`, `list` and `show`. Plain SELECTs and the stats
procedures an operator account may run (docs/security.md); nothing here changes a row."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from datetime import datetime
from typing import Any

from email_outbox.cli.common import (
    DAY_SECONDS,
    EXIT_NOTHING,
    EXIT_OK,
    add_dsn,
    open_repository,
    parse_since,
)
from email_outbox.db.tenant_calls import TenantStats
from email_outbox.display import age, error_line, print_json, short, table, visible, when
from email_outbox.errors import AccessDenied, InvalidInput
from email_outbox.models import (
    DeliveryEvent,
    ProviderEventRow,
    ProviderState,
    ProviderStats,
    RetentionRuns,
    Status,
)
from email_outbox.operator_text import parse_duration
from email_outbox.ses import PROVIDER
from email_outbox.version import SchemaRelease


def _parse_status(text: str) -> Status:
    for status in Status:
        if status.value.lower() == text.lower():
            return status
    raise InvalidInput(f"--status must be one of {', '.join(s.value for s in Status)} (got {text!r})")


def cmd_status(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        counts = repo.outbox_stats()
        health = repo.queue_health()
        wait = int(parse_duration(args.evidence_wait))
        provider = repo.provider_stats(DAY_SECONDS, wait)
        states = repo.provider_state_counts(DAY_SECONDS)
        unsent = repo.unsent_failures(DAY_SECONDS)
        breaker = repo.breaker_state(PROVIDER)
        send_rate = repo.send_rate_status()
        durability = repo.durability_risks()
        # An operator account granted before 0.2.0 reads neither: `grant operator` again.
        try:
            schema: SchemaRelease | None = SchemaRelease(repo.schema_release())
            retention: RetentionRuns | None = repo.retention_last_run()
            tenants: list[TenantStats] | None = repo.tenant_stats()
        except AccessDenied:
            schema, retention, tenants = None, None, None
    suppressed = unsent["Suppressed"]
    by_status = {c.status.value: c.count for c in counts}
    if args.json:
        print_json(
            {
                "counts": by_status,
                "oldest_due_at": health.oldest_due_at,
                "oldest_due_age_seconds": round(health.oldest_due_age_seconds, 3),
                "processing_past_lease": health.overdue_leases,
                "unknown_outcome": by_status[Status.UNKNOWN_OUTCOME.value],
                "database_time": health.now,
                "provider_24h": asdict(provider),
                "provider_states_24h": states,
                "suppressed_failures_24h": suppressed,
                "provider_breaker": asdict(breaker),
                "send_rate": asdict(send_rate) if send_rate else None,
                "failed_unsent_24h": unsent,
                "durability_risks": [asdict(r) for r in durability],
                "retention_last_finished_at": retention.last_finished_at if retention else None,
                "tenants": [asdict(t) | {"held": t.held} for t in tenants] if tenants is not None else None,
                "schema": {
                    "database": schema.database if schema else None,
                    "package": schema.package if schema else None,
                    "state": schema.state if schema else "unknown",
                },
            }
        )
        return EXIT_OK
    print(
        table(
            ["status", "count", "oldest due (UTC)"],
            [[c.status.value, c.count, when(c.oldest_due_at)] for c in counts],
        )
    )
    print()
    due = (
        f"{age(health.oldest_due_age_seconds)} (due {when(health.oldest_due_at)} UTC)"
        if health.oldest_due_at
        else "nothing due"
    )
    print(f"oldest due row waiting:  {due}")
    print(f"Processing past lease:   {health.overdue_leases}")
    unknown = by_status[Status.UNKNOWN_OUTCOME.value]
    hint = "  (needs an operator: docs/operations.md)" if unknown else ""
    print(f"UnknownOutcome:          {unknown}{hint}")
    hint = "  (workers hold their sends: docs/operations.md, SES outage)" if breaker.down else ""
    print(f"provider state:          {visible(breaker.summary())}{hint}")
    print(
        f"SES account:             {send_rate.describe() if send_rate else 'no send rate row: run migrate'}"
    )
    print("Failed unsent, last 24h: " + ", ".join(f"{code} {n}" for code, n in unsent.items()))
    if durability:
        for risk in durability:
            print(f"durability:              WARNING {visible(risk.describe())}")
    else:
        print(
            "durability:              no setting known to lose commits (docs/operations.md, Durability settings)"
        )
    print(f"retention last finished: {_retention_line(retention)}")
    print(
        "schema release:          "
        + (schema.describe() if schema else "not readable: run `email-outbox grant operator` again")
    )
    print()
    if tenants:
        _print_tenants(tenants)
    _print_provider_figures(provider, states, suppressed, args.evidence_wait)
    return EXIT_OK


def _print_tenants(tenants: list[TenantStats]) -> None:
    """Per tenant: its share, its due rows and how long the oldest waited, what its claims took in 24 h,
    SES's rates for it, and what holds it (docs/design.md, "Tenants")."""
    print(
        table(
            ["tenant", "weight", "due", "oldest due", "claimed 24h", "bounce", "complaint", "held"],
            [
                [
                    t.tenant,
                    t.weight,
                    t.due_rows,
                    age(t.oldest_due_age_seconds) if t.due_rows else "-",
                    t.claimed_24h,
                    _rate_or_dash(t.bounce_rate),
                    _rate_or_dash(t.complaint_rate),
                    visible(
                        f"{t.held}: {t.guard_reason}"
                        if t.guard_reason and t.paused_reason is None
                        else t.held or "-"
                    ),
                ]
                for t in tenants
            ],
        )
    )
    print()


def _rate_or_dash(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.2f}%"


def _retention_line(runs: RetentionRuns | None) -> str:
    if runs is None:
        return "not readable: run `email-outbox grant operator` again"
    if runs.last_finished_at is None:
        return "never (schedule `email-outbox retention`: docs/operations.md)"
    since = (runs.database_now - runs.last_finished_at).total_seconds()
    return f"{when(runs.last_finished_at)} UTC, {age(since)} ago"


def _rate(value: float | None, limit: float) -> str:
    if value is None:
        return "n/a (no Send event recorded in 24h)"
    warning = f"  over SES's review level of {limit:.1%}" if value >= limit else ""
    return f"{value:.3%}{warning}"


def _print_provider_figures(
    provider: ProviderStats, states: dict[str, int], suppressed: int, wait: str
) -> None:
    """The figures SES reviews an account on, from the events `email-outbox events` recorded."""
    print("SES events, last 24h:    " + ", ".join(
        f"{name} {n}" for name, n in (
            ("Send", provider.sends), ("Delivery", provider.deliveries), ("DeliveryDelay", provider.delays),
            ("Bounce", provider.bounces), ("Complaint", provider.complaints), ("Reject", provider.rejects),
            ("RenderingFailure", provider.rendering_failures),
        )
    ))  # fmt: skip
    print("latest provider states:  " + (", ".join(f"{k} {v}" for k, v in sorted(states.items())) or "-"))
    print(f"bounce rate (24h):       {_rate(provider.bounce_rate, 0.05)}")
    print(f"complaint rate (24h):    {_rate(provider.complaint_rate, 0.001)}")
    print(
        f"suppressed addresses:    {provider.suppressed_addresses} ({suppressed} emails not sent to them, 24h)"
    )
    hint = "  (no SES event: need an operator, docs/events.md)" if provider.unknown_without_evidence else ""
    print(f"UnknownOutcome, no evidence after {wait}: {provider.unknown_without_evidence}{hint}")


def cmd_list(args: argparse.Namespace) -> int:
    status = _parse_status(args.status)
    if not 1 <= args.limit <= 100_000:
        raise InvalidInput("--limit must be 1 to 100000")
    with open_repository(args) as repo:
        since = parse_since(args.since, repo.database_time()) if args.since else None
        rows = repo.list_rows(
            status, since=since, limit=args.limit, priority=args.priority, tenant=args.tenant
        )
    if args.json:
        print_json([asdict(r) for r in rows])
    elif rows:
        print(
            table(
                [
                    "id",
                    "notification_id",
                    "to",
                    "tenant",
                    "prio",
                    "attempts",
                    "last_error",
                    "claimed_by",
                    "created",
                    "updated",
                ],
                [
                    [
                        r.id,
                        short(r.notification_id, 40),
                        short(r.to_address, 40),
                        short(r.tenant, 24),
                        r.priority,
                        f"{r.attempt_count}/{r.max_attempts}",
                        short(error_line(r.last_error_code, r.last_error_message), 50),
                        r.claimed_by or "-",
                        when(r.created_at),
                        when(r.updated_at),
                    ]
                    for r in rows
                ],
            )
        )
    else:
        print(f"no {status.value} rows", file=sys.stderr)
    return EXIT_OK if rows else EXIT_NOTHING


def _event_line(e: DeliveryEvent) -> list[Any]:
    return [
        when(e.occurred_at),
        f"{e.from_status.value if e.from_status else '-'} -> {e.to_status.value}",
        e.actor or "-",
        e.db_account or "-",
        e.claim_token or "-",
        short(e.detail, 70),
    ]


def cmd_show(args: argparse.Namespace) -> int:
    if (args.id is None) == (args.notification_id is None):
        raise InvalidInput("show takes an ID or --notification-id, one of the two")
    with open_repository(args) as repo:
        row = (
            repo.get_row(args.id)
            if args.id is not None
            else repo.get_row_by_notification_id(args.notification_id, args.account)
        )
        events = repo.events(row.id)
        attachments = repo.attachments_of(row.id)
        state = repo.provider_state(row.id)
        provider_events = repo.provider_events(row.id)
    if args.json:
        print_json(
            {
                "row": asdict(row),
                "attachments": attachments,
                "events": [asdict(e) for e in events],
                "provider_state": asdict(state) if state else None,
                "provider_events": [asdict(e) for e in provider_events],
            }
        )
        return EXIT_OK
    fields = asdict(row)
    width = max(len(k) for k in fields)
    for key, value in fields.items():
        shown = when(value) + " UTC" if isinstance(value, datetime) else ("-" if value is None else value)
        print(f"{key:<{width}}  {visible(str(shown))}")
    if attachments:
        print()
        print(f"attachments ({len(attachments)}):")
        print(
            table(
                ["#", "filename", "content type", "disposition", "content id", "bytes"],
                [[str(a["position"]), a["filename"], a["content_type"], a["disposition"], a["content_id"] or "-",
                  "-" if a["bytes"] is None else str(a["bytes"])] for a in attachments],
            )
        )  # fmt: skip
    print()
    print(f"history ({len(events)} events):")
    print(
        table(
            ["at (UTC)", "transition", "actor", "db account", "claim_token", "detail"],
            [_event_line(e) for e in events],
        )
    )
    print()
    _print_provider(state, provider_events)
    return EXIT_OK


def _print_provider(state: ProviderState | None, provider_events: list[ProviderEventRow]) -> None:
    """What SES said after it accepted: the latest provider state and every event."""
    if state is None:
        print("provider state:  - (no SES event recorded)")
        return
    kind = " ".join(k for k in (state.kind, state.subkind) if k)
    print(
        visible(
            f"provider state:  {state.state}{' (' + kind + ')' if kind else ''} at {when(state.state_at)} UTC"
        )
    )
    print(f"SES events ({len(provider_events)}):")
    print(
        table(
            ["event time (UTC)", "type", "SES MessageId", "kind", "detail", "match"],
            [
                [
                    when(e.event_at),
                    e.event_type,
                    e.ses_message_id,
                    " ".join(k for k in (e.kind, e.subkind) if k) or "-",
                    short(e.detail, 50),
                    short(e.match_note, 60),
                ]
                for e in provider_events
            ],
        )
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="counts per status, oldest due row, overdue leases, SES figures")
    add_dsn(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--evidence-wait",
        default="15m",
        help="count UnknownOutcome rows with no SES event after this long (default 15m)",
    )
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("list", help="rows in one status")
    add_dsn(p)
    p.add_argument(
        "--status", required=True, help="Pending, Retrying, Processing, Sent, Failed, UnknownOutcome"
    )
    p.add_argument("--since", help="entered that status since: ISO time (UTC) or a duration back (e.g. 2h)")
    p.add_argument("--limit", type=int, default=50, help="at most this many rows (default 50)")
    p.add_argument("--priority", type=int, choices=range(10), metavar="0-9", help="only this priority")
    p.add_argument("--tenant", help="only this tenant's rows")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="one email and its full event history")
    add_dsn(p)
    p.add_argument("id", nargs="?", type=int, help="the outbox id (attempt id)")
    p.add_argument("--notification-id", help="look up by the caller's notification id instead")
    p.add_argument(
        "--account",
        help="with --notification-id: the database user name that enqueued it (ids are per account)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_show)
