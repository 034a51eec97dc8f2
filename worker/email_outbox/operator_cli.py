"""The operator commands of `email-outbox`: status, list, show, requeue, resolve, enqueue, purge-bodies,
grant. Every change goes through a stored procedure; the reads are plain SELECTs an operator account
may run (docs/security.md).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from email_outbox.cli_common import EXIT_NOTHING, EXIT_OK, add_dsn, dsn_from
from email_outbox.db import DRIVER_ERRORS, translate_error
from email_outbox.display import visible
from email_outbox.errors import InvalidInput
from email_outbox.models import DeliveryEvent, Status
from email_outbox.repository import OutboxRepository

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}

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


@contextmanager
def _repository(args: argparse.Namespace) -> Iterator[OutboxRepository]:
    repo = OutboxRepository.open(dsn_from(args))
    try:
        repo.read_consistently()
        yield repo
    finally:
        repo.close()


# --- output ----------------------------------------------------------------------------------------
def _when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat() + "Z"
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _print_json(value: Any) -> None:
    # ASCII-only: every control, bidi and separator character arrives as a \u escape, never raw.
    print(json.dumps(_jsonable(value), indent=2, ensure_ascii=True))


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[visible(str(c)) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _short(text: str | None, width: int = 60) -> str:
    if not text:
        return "-"
    one_line = visible(" ".join(text.split()))
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


# --- status ----------------------------------------------------------------------------------------
def cmd_status(args: argparse.Namespace) -> int:
    with _repository(args) as repo:
        counts = repo.outbox_stats()
        health = repo.queue_health()
    by_status = {c.status.value: c.count for c in counts}
    if args.json:
        _print_json(
            {
                "counts": by_status,
                "oldest_due_at": health.oldest_due_at,
                "oldest_due_age_seconds": round(health.oldest_due_age_seconds, 3),
                "processing_past_lease": health.overdue_leases,
                "unknown_outcome": by_status[Status.UNKNOWN_OUTCOME.value],
                "database_time": health.now,
            }
        )
        return EXIT_OK
    print(
        _table(
            ["status", "count", "oldest due (UTC)"],
            [[c.status.value, c.count, _when(c.oldest_due_at)] for c in counts],
        )
    )
    print()
    due = (
        f"{_age(health.oldest_due_age_seconds)} (due {_when(health.oldest_due_at)} UTC)"
        if health.oldest_due_at
        else "nothing due"
    )
    print(f"oldest due row waiting:  {due}")
    print(f"Processing past lease:   {health.overdue_leases}")
    unknown = by_status[Status.UNKNOWN_OUTCOME.value]
    hint = "  (needs an operator: docs/operations.md)" if unknown else ""
    print(f"UnknownOutcome:          {unknown}{hint}")
    return EXIT_OK


# --- list / show -----------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    status = _parse_status(args.status)
    if not 1 <= args.limit <= 100_000:
        raise InvalidInput("--limit must be 1 to 100000")
    with _repository(args) as repo:
        since = parse_since(args.since, repo.database_time()) if args.since else None
        rows = repo.list_rows(status, since=since, limit=args.limit)
    if args.json:
        _print_json([asdict(r) for r in rows])
    elif rows:
        print(
            _table(
                ["id", "notification_id", "to", "attempts", "last_error", "claimed_by", "created", "updated"],
                [
                    [
                        r.id,
                        _short(r.notification_id, 40),
                        _short(r.to_address, 40),
                        f"{r.attempt_count}/{r.max_attempts}",
                        _short(
                            f"{r.last_error_code}: {r.last_error_message}" if r.last_error_code else None, 50
                        ),
                        r.claimed_by or "-",
                        _when(r.created_at),
                        _when(r.updated_at),
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
        _when(e.occurred_at),
        f"{e.from_status.value if e.from_status else '-'} -> {e.to_status.value}",
        e.actor or "-",
        e.db_account or "-",
        e.claim_token or "-",
        _short(e.detail, 70),
    ]


def cmd_show(args: argparse.Namespace) -> int:
    if (args.id is None) == (args.notification_id is None):
        raise InvalidInput("show takes an ID or --notification-id, one of the two")
    with _repository(args) as repo:
        row = (
            repo.get_row(args.id)
            if args.id is not None
            else repo.get_row_by_notification_id(args.notification_id)
        )
        events = repo.events(row.id)
    if args.json:
        _print_json({"row": asdict(row), "events": [asdict(e) for e in events]})
        return EXIT_OK
    fields = asdict(row)
    width = max(len(k) for k in fields)
    for key, value in fields.items():
        shown = _when(value) + " UTC" if isinstance(value, datetime) else ("-" if value is None else value)
        print(f"{key:<{width}}  {visible(str(shown))}")
    print()
    print(f"history ({len(events)} events):")
    print(
        _table(
            ["at (UTC)", "transition", "actor", "db account", "claim_token", "detail"],
            [_event_line(e) for e in events],
        )
    )
    return EXIT_OK


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
    with _repository(args) as repo:
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


def cmd_resolve(args: argparse.Namespace) -> int:
    with _repository(args) as repo:
        affected = repo.resolve_unknown_outcome(args.id, args.outcome, args.by, args.reason, args.message_id)
        if affected == 0:
            row = repo.get_row(args.id)
            print(f"not resolved: email {args.id} is {row.status.value}, not UnknownOutcome", file=sys.stderr)
            return EXIT_NOTHING
    print(f"resolved email {args.id}: UnknownOutcome -> {args.outcome}")
    return EXIT_OK


def _read_body(inline: str | None, path: str | None, what: str) -> str | None:
    if inline is not None and path is not None:
        raise InvalidInput(f"give --{what} or --{what}-file, not both")
    if path is not None:
        try:
            return Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"--{what}-file: {exc}") from None
    return inline


_ENQUEUE_KEYS = {
    "notification_id",
    "to",
    "from",
    "subject",
    "text",
    "html",
    "max_attempts",
    "send_after",
}


def _enqueue_requests(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.json_file is not None:
        if any(getattr(args, k) is not None for k in ("notification_id", "to", "subject", "text", "html")):
            raise InvalidInput("--json takes the whole email; do not mix it with the other flags")
        try:
            raw = sys.stdin.read() if args.json_file == "-" else Path(args.json_file).read_text("utf-8")
            data = json.loads(raw)
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidInput(f"--json: {exc}") from None
        items = data if isinstance(data, list) else [data]
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidInput(f"--json: item {n} is not an object")
            unknown = set(item) - _ENQUEUE_KEYS
            if unknown:
                raise InvalidInput(
                    f"--json: item {n} has unknown keys {sorted(unknown)}; allowed {sorted(_ENQUEUE_KEYS)}"
                )
            for key, value in item.items():
                wanted = int if key == "max_attempts" else str
                if value is not None and (type(value) is not wanted):
                    raise InvalidInput(f"--json: item {n}: {key} must be a {wanted.__name__} or null")
        return items
    missing = [f for f in ("notification_id", "to", "subject") if getattr(args, f) is None]
    if missing:
        raise InvalidInput(
            "enqueue needs " + ", ".join("--" + m.replace("_", "-") for m in missing) + " (or --json)"
        )
    return [
        {
            "notification_id": args.notification_id,
            "to": args.to,
            "from": args.from_address,
            "subject": args.subject,
            "text": _read_body(args.text, args.text_file, "text"),
            "html": _read_body(args.html, args.html_file, "html"),
            "max_attempts": args.max_attempts,
            "send_after": args.send_after,
        }
    ]


def _send_after(value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"send_after must be an ISO time (got {value!r})") from None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def cmd_enqueue(args: argparse.Namespace) -> int:
    items = _enqueue_requests(args)
    new = 0
    with _repository(args) as repo:
        for item in items:
            result = repo.enqueue(
                item.get("notification_id"),  # type: ignore[arg-type]
                item.get("to"),  # type: ignore[arg-type]
                item.get("subject"),  # type: ignore[arg-type]
                text_body=item.get("text"),
                html_body=item.get("html"),
                from_address=item.get("from"),
                max_attempts=item.get("max_attempts"),
                send_after=_send_after(item.get("send_after")),
            )
            new += result.affected
            kind = "duplicate of" if result.duplicate else "enqueued as"
            print(f"{visible(str(item.get('notification_id')))}: {kind} id {result.attempt_id}")
    return EXIT_OK if new or not items else EXIT_NOTHING


def cmd_purge_bodies(args: argparse.Namespace) -> int:
    total = 0
    with _repository(args) as repo:
        after_id = 0
        while True:
            affected, after_id = repo.purge_bodies_after(args.older_than_days, after_id, args.batch)
            total += affected
            if affected < args.batch:
                break
    print(f"cleared the bodies of {total} terminal emails older than {args.older_than_days} days")
    return EXIT_OK if total else EXIT_NOTHING


def _new_account_password(args: argparse.Namespace, account: object) -> str:
    """The password for `grant --create`: from stdin, an environment variable or a prompt; never argv."""
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif args.password_env:
        if args.password_env not in os.environ:
            raise InvalidInput(f"--password-env {args.password_env}: that variable is not set")
        password = os.environ[args.password_env]
    elif sys.stdin.isatty():
        password = getpass.getpass(f"password for {account}: ")
    else:
        raise InvalidInput("--create needs a password: --password-stdin, --password-env VAR, or a terminal")
    if not password:
        raise InvalidInput("refusing to create an account with an empty password")
    return password


def cmd_grant(args: argparse.Namespace) -> int:
    from email_outbox.grants import Account, apply_grants, grant_statements

    account = Account.parse(args.account)
    if not args.create and (args.password_env or args.password_stdin):
        raise InvalidInput("--password-env and --password-stdin only go with --create")
    dsn = dsn_from(args)
    database = args.database or dsn.database
    if args.print_only:
        for statement in grant_statements(args.role, account, database):
            print(statement + ";")
        return EXIT_OK
    password = _new_account_password(args, account) if args.create else None
    with _repository(args) as repo:
        cursor = repo.connection.cursor()
        try:
            for statement in apply_grants(cursor, args.role, account, database, create_password=password):
                print(statement)
        except DRIVER_ERRORS as exc:
            raise translate_error(exc) from exc
        finally:
            cursor.close()
    print(f"{account} now has the {args.role} role on {database}")
    return EXIT_OK


# --- parser ----------------------------------------------------------------------------------------
def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("status", help="counts per status, oldest due row, overdue leases")
    add_dsn(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("list", help="rows in one status")
    add_dsn(p)
    p.add_argument(
        "--status", required=True, help="Pending, Retrying, Processing, Sent, Failed, UnknownOutcome"
    )
    p.add_argument("--since", help="entered that status since: ISO time (UTC) or a duration back (e.g. 2h)")
    p.add_argument("--limit", type=int, default=50, help="at most this many rows (default 50)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="one email and its full event history")
    add_dsn(p)
    p.add_argument("id", nargs="?", type=int, help="the outbox id (attempt id)")
    p.add_argument("--notification-id", help="look up by the caller's notification id instead")
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

    p = sub.add_parser("enqueue", help="an ad-hoc email (flags, or --json FILE with one object or a list)")
    add_dsn(p)
    p.add_argument("--notification-id")
    p.add_argument("--to")
    p.add_argument("--from", dest="from_address", help="default: the worker's sender")
    p.add_argument("--subject")
    p.add_argument("--text", help="text body")
    p.add_argument("--text-file", help="text body from a file")
    p.add_argument("--html", help="HTML body")
    p.add_argument("--html-file", help="HTML body from a file")
    p.add_argument("--max-attempts", type=int)
    p.add_argument("--send-after", help="ISO time; default now")
    p.add_argument(
        "--json",
        dest="json_file",
        help="a JSON file ('-' for stdin): keys " + ", ".join(sorted(_ENQUEUE_KEYS)),
    )
    p.set_defaults(func=cmd_enqueue)

    p = sub.add_parser("purge-bodies", help="clear bodies of old terminal emails (rows and ids stay)")
    add_dsn(p)
    p.add_argument("--older-than-days", type=int, required=True)
    p.add_argument("--batch", type=int, default=1000, help="rows per procedure call (1 to 10000)")
    p.set_defaults(func=cmd_purge_bodies)

    p = sub.add_parser("grant", help="give an account the enqueuer, worker or operator role")
    add_dsn(p)
    p.add_argument("role", choices=["enqueuer", "worker", "operator"])
    p.add_argument("account", help="user or user@host (host defaults to %%)")
    p.add_argument("--database", help="the outbox database (default: the DSN's)")
    p.add_argument("--create", action="store_true", help="create the account if it does not exist")
    p.add_argument("--password-env", help="with --create: read the password from this variable")
    p.add_argument(
        "--password-stdin",
        action="store_true",
        help="with --create: read the password from stdin's first line",
    )
    p.add_argument("--print", dest="print_only", action="store_true", help="print the GRANTs, run nothing")
    p.set_defaults(func=cmd_grant)
