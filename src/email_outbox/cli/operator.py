"""The operator commands of `email-outbox`: status, list, show, requeue, resolve, redrive, cancel, purge-bodies. Every
change goes through a stored procedure; the reads are plain SELECTs an operator account may run
(docs/security.md). `enqueue`, `grant` and `senders` have modules of their own.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, open_repository
from email_outbox.db.repository import OutboxRepository
from email_outbox.display import age, print_json, short, table, visible, when
from email_outbox.errors import InvalidInput, NotFound
from email_outbox.models import DeliveryEvent, ProviderEventRow, ProviderState, ProviderStats, Status
from email_outbox.ses import PROVIDER

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
DAY_SECONDS = 86_400

REQUEUE_WARNING = (
    "warning: a requeued email may reach the recipient twice if SES accepted the earlier attempt;"
    " check SES first (docs/operations.md)"
)


def parse_duration(text: str) -> float:
    """'90s', '15m', '2h', '7d', '1w', or plain seconds."""
    match = _DURATION.match(text)
    if not match:
        raise InvalidInput(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 7d)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]


def parse_since(text: str, now: datetime) -> datetime:
    """An ISO time (UTC when no offset is given) or a duration back from the database clock."""
    if _DURATION.match(text):
        return now - timedelta(seconds=parse_duration(text))
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"--since takes an ISO time or a duration (got {text!r})") from None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def _parse_status(text: str) -> Status:
    for status in Status:
        if status.value.lower() == text.lower():
            return status
    raise InvalidInput(f"--status must be one of {', '.join(s.value for s in Status)} (got {text!r})")


# --- status ----------------------------------------------------------------------------------------
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
    print()
    _print_provider_figures(provider, states, suppressed, args.evidence_wait)
    return EXIT_OK


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


# --- list / show -----------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    status = _parse_status(args.status)
    if not 1 <= args.limit <= 100_000:
        raise InvalidInput("--limit must be 1 to 100000")
    with open_repository(args) as repo:
        since = parse_since(args.since, repo.database_time()) if args.since else None
        rows = repo.list_rows(status, since=since, limit=args.limit, priority=args.priority)
    if args.json:
        print_json([asdict(r) for r in rows])
    elif rows:
        print(
            table(
                [
                    "id",
                    "notification_id",
                    "to",
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
                        r.priority,
                        f"{r.attempt_count}/{r.max_attempts}",
                        short(
                            f"{r.last_error_code}: {r.last_error_message}" if r.last_error_code else None, 50
                        ),
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


# --- operator actions ------------------------------------------------------------------------------
def _confirm(question: str, assume_yes: bool) -> bool:
    if assume_yes:
        return True
    if not sys.stdin.isatty():
        print(f"{question} refused: no terminal to confirm on; pass --yes", file=sys.stderr)
        return False
    answer = input(f"{question} [y/N] ").strip().lower()
    return answer in ("y", "yes")


def cmd_requeue(args: argparse.Namespace) -> int:
    if args.all_unknown == (args.id is not None):
        raise InvalidInput("requeue takes an ID or --all-unknown, one of the two")
    if args.all_unknown and args.older_than is None:
        raise InvalidInput("--all-unknown needs --older-than (e.g. --older-than 1h)")
    with open_repository(args) as repo:
        if not args.all_unknown:
            affected = repo.requeue_unknown_outcome(args.id, args.by, args.reason)
            if affected == 0:
                row = repo.get_row(args.id)
                print(
                    f"not requeued: email {args.id} is {row.status.value}, not UnknownOutcome",
                    file=sys.stderr,
                )
                return EXIT_NOTHING
            print(f"requeued email {args.id} (UnknownOutcome -> Pending)")
            print(REQUEUE_WARNING, file=sys.stderr)
            return EXIT_OK
        rows = repo.list_rows(
            Status.UNKNOWN_OUTCOME, older_than_seconds=parse_duration(args.older_than), limit=args.limit
        )
        if not rows:
            print(f"no UnknownOutcome rows older than {args.older_than}", file=sys.stderr)
            return EXIT_NOTHING
        print(
            f"{len(rows)} UnknownOutcome emails older than {args.older_than}, ids {rows[0].id}..{rows[-1].id}"
        )
        print(REQUEUE_WARNING, file=sys.stderr)
        if not _confirm(f"requeue {len(rows)} emails?", args.yes):
            return EXIT_NOTHING
        done = sum(repo.requeue_unknown_outcome(r.id, args.by, args.reason) for r in rows)
    print(
        f"requeued {done} of {len(rows)} (the rest changed state meanwhile)"
        if done < len(rows)
        else f"requeued {done}"
    )
    return EXIT_OK if done else EXIT_NOTHING


def cmd_cancel(args: argparse.Namespace) -> int:
    # By row id (email_cancel_email): an operator cancels whichever account's email it names, and
    # --account picks one when two services used the same notification id.
    with open_repository(args) as repo:
        try:
            target = repo.get_row_by_notification_id(args.notification_id, args.account)
        except NotFound:
            print(
                f"not cancelled: no email with notification id {visible(args.notification_id)}",
                file=sys.stderr,
            )
            return EXIT_NOTHING
        result = repo.cancel_email(target.id, args.by, args.reason)
        row = repo.get_row(target.id)
    name = visible(args.notification_id)
    if not result.affected:
        why = (
            "its send may have started or be done"
            if row.status in (Status.PROCESSING, Status.SENT, Status.UNKNOWN_OUTCOME)
            else "it is already terminal"
        )
        print(f"not cancelled: email {row.id} ({name}) is {row.status.value}: {why}", file=sys.stderr)
        return EXIT_NOTHING
    source = result.from_status.value if result.from_status else "?"
    print(f"cancelled email {row.id} ({name}): {source} -> Failed (Cancelled), never sent")
    return EXIT_OK


def cmd_resolve(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        affected = repo.resolve_unknown_outcome(args.id, args.outcome, args.by, args.reason, args.message_id)
        if affected == 0:
            row = repo.get_row(args.id)
            print(f"not resolved: email {args.id} is {row.status.value}, not UnknownOutcome", file=sys.stderr)
            return EXIT_NOTHING
    print(f"resolved email {args.id}: UnknownOutcome -> {args.outcome}")
    return EXIT_OK


REDRIVE_BATCH_MAX = 1000


def cmd_redrive(args: argparse.Namespace) -> int:
    """One Failed email SES never accepted, or all of those that failed in a time range, back to
    Pending with a fresh attempt budget (email_redrive_failed, email_redrive_failed_batch)."""
    if (args.notification_id is None) == (args.failed_since is None):
        raise InvalidInput("redrive takes a NOTIFICATION_ID or --failed-since, one of the two")
    if args.notification_id is not None and (args.until or args.error_code or args.dry_run):
        raise InvalidInput("--until, --error-code and --dry-run go with --failed-since")
    if not 1 <= args.batch <= REDRIVE_BATCH_MAX:
        raise InvalidInput(f"--batch must be 1 to {REDRIVE_BATCH_MAX}")
    with open_repository(args) as repo:
        if args.notification_id is not None:
            return _redrive_one(repo, args.notification_id, args.by, args.reason)
        now = repo.database_time()
        since = parse_since(args.failed_since, now)
        until = parse_since(args.until, now) if args.until else None
        moved = examined = after = 0
        while True:
            batch = repo.redrive_failed_batch(
                since, until, args.error_code, after, args.batch,
                dry_run=args.dry_run, redriven_by=args.by, reason=args.reason,
            )  # fmt: skip
            moved, examined, after = moved + batch.affected, examined + batch.examined, batch.last_id
            if batch.examined < args.batch:
                break
    verb = "would redrive" if args.dry_run else "redrove"
    print(
        f"{verb} {moved} Failed emails (failed since {when(since)} UTC"
        f"{f' until {when(until)} UTC' if until else ''}"
        f"{f', error {args.error_code}' if args.error_code else ''}; {examined} Failed rows looked at,"
        f" in batches of {args.batch})"
    )
    return EXIT_OK if moved else EXIT_NOTHING


def _redrive_one(repo: OutboxRepository, notification_id: str, by: str, reason: str) -> int:
    if repo.redrive_failed(notification_id, by, reason):
        row = repo.get_row_by_notification_id(notification_id)
        print(f"redrove email {row.id} ({visible(notification_id)}): Failed -> Pending, attempts reset to 0")
        return EXIT_OK
    row = repo.get_row_by_notification_id(notification_id)  # NotFound says so for an unknown id
    why = (
        f"it is {row.status.value}, not Failed"
        if row.status is not Status.FAILED
        else "SES may have accepted it (a MessageId, an accepting SES event, or an earlier"
        " UnknownOutcome); check SES, and see `requeue` in docs/operations.md"
    )
    print(f"not redriven: email {row.id}: {why}", file=sys.stderr)
    return EXIT_NOTHING


def cmd_purge_bodies(args: argparse.Namespace) -> int:
    total = 0
    with open_repository(args) as repo:
        after_id = 0
        while True:
            affected, after_id = repo.purge_bodies_after(args.older_than_days, after_id, args.batch)
            total += affected
            if affected < args.batch:
                break
    print(f"cleared the bodies of {total} terminal emails older than {args.older_than_days} days")
    return EXIT_OK if total else EXIT_NOTHING


# --- parser ----------------------------------------------------------------------------------------
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

    p = sub.add_parser("requeue", help="UnknownOutcome -> Pending, after checking SES (may send twice)")
    add_dsn(p)
    p.add_argument("id", nargs="?", type=int)
    p.add_argument(
        "--all-unknown", action="store_true", help="every UnknownOutcome row older than --older-than"
    )
    p.add_argument(
        "--older-than", help="with --all-unknown: in UnknownOutcome for at least this long (e.g. 1h)"
    )
    p.add_argument("--limit", type=int, default=10_000, help="with --all-unknown: at most this many rows")
    p.add_argument("--by", required=True, help="your name, written to the audit log")
    p.add_argument("--reason", required=True, help="why, written to the audit log")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(func=cmd_requeue)

    p = sub.add_parser("resolve", help="UnknownOutcome -> Sent or Failed, an operator's verdict")
    add_dsn(p)
    p.add_argument("id", type=int)
    p.add_argument("--outcome", required=True, choices=["Sent", "Failed"])
    p.add_argument("--by", required=True, help="your name, written to the audit log")
    p.add_argument("--reason", required=True, help="why, written to the audit log")
    p.add_argument("--message-id", help="the SES MessageId, when you found it")
    p.set_defaults(func=cmd_resolve)

    p = sub.add_parser(
        "redrive",
        help="Failed emails SES never accepted -> Pending with fresh attempts (same notification id)",
    )
    add_dsn(p)
    p.add_argument("notification_id", nargs="?", help="one email, by the caller's notification id")
    p.add_argument(
        "--failed-since",
        help="every such email that failed since: 'YYYY-MM-DD HH:MM:SS' (UTC) or a duration back",
    )
    p.add_argument("--until", help="with --failed-since: failed before this time (UTC) or duration back")
    p.add_argument("--error-code", help="with --failed-since: only emails whose last error is this code")
    p.add_argument("--dry-run", action="store_true", help="with --failed-since: count, change nothing")
    p.add_argument(
        "--batch", type=int, default=500, help=f"Failed rows looked at per call (1 to {REDRIVE_BATCH_MAX})"
    )
    p.add_argument("--by", required=True, help="your name, written to the audit log")
    p.add_argument("--reason", required=True, help="why, written to the audit log")
    p.set_defaults(func=cmd_redrive)

    p = sub.add_parser(
        "cancel", help="an email not yet handed to SES -> Failed (Cancelled); exit 1 when nothing changed"
    )
    add_dsn(p)
    p.add_argument("notification_id", help="the caller's notification id")
    p.add_argument(
        "--account",
        help="the database user name that enqueued it, when several accounts used the notification id",
    )
    p.add_argument("--by", required=True, help="your name, written to the audit log")
    p.add_argument("--reason", required=True, help="why, written to the audit log")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("purge-bodies", help="clear bodies of old terminal emails (rows and ids stay)")
    add_dsn(p)
    p.add_argument("--older-than-days", type=int, required=True)
    p.add_argument("--batch", type=int, default=1000, help="rows per procedure call (1 to 10000)")
    p.set_defaults(func=cmd_purge_bodies)
