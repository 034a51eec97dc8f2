"""What an operator does to an email: `email-outbox requeue`, `resolve`, `redrive`, `cancel` and
`purge-bodies`. Every change goes through a stored procedure, audited with --by and --reason."""

from __future__ import annotations

import argparse
import sys

from email_outbox.cli.common import (
    EXIT_NOTHING,
    EXIT_OK,
    add_dsn,
    open_repository,
    parse_since,
)
from email_outbox.display import visible, when
from email_outbox.errors import InvalidInput, NotFound
from email_outbox.models import DeliveryRow, Status
from email_outbox.operator_text import REQUEUE_WARNING, parse_duration


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
    # --account/--tenant pick one when two services used the same notification id.
    with open_repository(args) as repo:
        try:
            target = repo.get_row_by_notification_id(args.notification_id, args.account, args.tenant)
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
    Pending with a fresh attempt budget (email_redrive_email, email_redrive_failed_batch)."""
    chosen = [args.notification_id is not None, args.id is not None, args.failed_since is not None]
    if sum(chosen) != 1:
        raise InvalidInput("redrive takes a NOTIFICATION_ID, --id or --failed-since, one of the three")
    if not chosen[2] and (args.until or args.error_code or args.dry_run):
        raise InvalidInput("--until, --error-code and --dry-run go with --failed-since")
    if args.notification_id is None and (args.account is not None or args.tenant is not None):
        raise InvalidInput("--account and --tenant go with a NOTIFICATION_ID")
    if not 1 <= args.batch <= REDRIVE_BATCH_MAX:
        raise InvalidInput(f"--batch must be 1 to {REDRIVE_BATCH_MAX}")
    with open_repository(args) as repo:
        if args.id is not None:
            if repo.redrive_email(args.id, args.by, args.reason):
                print(f"redrove email {args.id}: Failed -> Pending, attempts reset to 0")
                return EXIT_OK
            row = repo.get_row(args.id)  # NotFound says so for an unknown id
            return _not_redriven(row)
        if args.notification_id is not None:
            # The row the id names, chosen as cancel chooses it (--account, --tenant; several: refused
            # with their row ids), then redriven by row id: never another service's row.
            row = repo.get_row_by_notification_id(args.notification_id, args.account, args.tenant)
            if repo.redrive_email(row.id, args.by, args.reason):
                name = visible(args.notification_id)
                print(f"redrove email {row.id} ({name}): Failed -> Pending, attempts reset to 0")
                return EXIT_OK
            return _not_redriven(repo.get_row(row.id))
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


def _not_redriven(row: DeliveryRow) -> int:
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


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
        "--id", type=int, help="one email by its outbox id, whichever service enqueued it (ids can clash)"
    )
    p.add_argument(
        "--failed-since",
        help="every such email that failed since: 'YYYY-MM-DD HH:MM:SS' (UTC) or a duration back",
    )
    p.add_argument("--until", help="with --failed-since: failed before this time (UTC) or duration back")
    p.add_argument("--error-code", help="with --failed-since: only emails whose last error is this code")
    p.add_argument("--dry-run", action="store_true", help="with --failed-since: count, change nothing")
    p.add_argument(
        "--account",
        help="the database user name that enqueued it, when several accounts used the notification id",
    )
    p.add_argument("--tenant", help="the tenant it was enqueued for, when several used the notification id")
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
    p.add_argument("--tenant", help="the tenant it was enqueued for, when several used the notification id")
    p.add_argument("--by", required=True, help="your name, written to the audit log")
    p.add_argument("--reason", required=True, help="why, written to the audit log")
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("purge-bodies", help="clear bodies of old terminal emails (rows and ids stay)")
    add_dsn(p)
    p.add_argument("--older-than-days", type=int, required=True)
    p.add_argument("--batch", type=int, default=1000, help="rows per procedure call (1 to 10000)")
    p.set_defaults(func=cmd_purge_bodies)
