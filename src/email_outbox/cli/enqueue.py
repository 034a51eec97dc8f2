"""`email-outbox enqueue`: an ad-hoc email from flags (through email_enqueue), or whole messages from a
JSON file (through email_enqueue_message: cc, reply-to, headers, tags, attachments, templates), like
any other enqueuing service."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, open_repository
from email_outbox.db.repository import OutboxRepository
from email_outbox.display import visible
from email_outbox.errors import InvalidInput
from email_outbox.message import Message, check_size
from email_outbox.models import EnqueueResult


def _read_body(inline: str | None, path: str | None, what: str) -> str | None:
    if inline is not None and path is not None:
        raise InvalidInput(f"give --{what} or --{what}-file, not both")
    if path is not None:
        try:
            return Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"--{what}-file: {exc}") from None
    return inline


_FLAG_KEYS = ("notification_id", "to", "subject", "text", "html")


def _json_documents(path: str) -> list[tuple[str, dict[str, Any]]]:
    """(notification_id, message document) per item of a --json file: each item is the document of
    email_enqueue_message plus its notification_id. For files written for the older flat form, a
    single `to` string becomes a list and a send_after or expires_at without an offset is taken as UTC."""
    try:
        raw = sys.stdin.read() if path == "-" else Path(path).read_text("utf-8")
        data = json.loads(raw)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"--json: {exc}") from None
    items = data if isinstance(data, list) else [data]
    out = []
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInput(f"--json: item {n} is not an object")
        document = dict(item)
        notification_id = document.pop("notification_id", None)
        if not isinstance(notification_id, str):
            raise InvalidInput(f"--json: item {n}: notification_id must be a string")
        if isinstance(document.get("to"), str):
            document["to"] = [document["to"]]
        for key in ("send_after", "expires_at"):
            if isinstance(document.get(key), str):
                document[key] = _with_offset(document[key], key)
        out.append((notification_id, {k: v for k, v in document.items() if v is not None}))
    return out


def _with_offset(value: str, what: str) -> str:
    """An ISO time with its offset; one without is taken as UTC."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"{what} must be an ISO time (got {value!r})") from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).isoformat()


def _utc(value: str | None, what: str) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(_with_offset(value, what)).astimezone(UTC).replace(tzinfo=None)


def _enqueue_flags(repo: OutboxRepository, args: argparse.Namespace) -> EnqueueResult:
    """The flag email. The 8-argument email_enqueue has no priority, expiry or tenant: one that sets any
    goes through email_enqueue_message, as the same document a service would send."""
    text = _read_body(args.text, args.text_file, "text")
    html = _read_body(args.html, args.html_file, "html")
    send_after = _utc(args.send_after, "--send-after")
    check_size({"text": text, "html": html})
    if args.priority is None and args.expires_at is None and args.tenant is None:
        return repo.enqueue(
            args.notification_id,
            args.to,
            args.subject,
            text_body=text,
            html_body=html,
            from_address=args.from_address,
            max_attempts=args.max_attempts,
            send_after=send_after,
        )
    message = Message(
        to=[args.to],
        subject=args.subject,
        text=text,
        html=html,
        sender=args.from_address,
        max_attempts=args.max_attempts,
        send_after=send_after,
        priority=args.priority,
        expires_at=_utc(args.expires_at, "--expires-at"),
        tenant=args.tenant,
    )
    return repo.enqueue_message(args.notification_id, message.to_json())


def cmd_enqueue(args: argparse.Namespace) -> int:
    results = []
    with open_repository(args) as repo:
        if args.json_file is not None:
            if any(getattr(args, k) is not None for k in _FLAG_KEYS):
                raise InvalidInput("--json takes the whole email; do not mix it with the other flags")
            documents = _json_documents(args.json_file)
            for _, document in documents:
                check_size(document)  # every item before the first is sent
            for notification_id, document in documents:
                message = json.dumps(document, ensure_ascii=False)
                results.append((notification_id, repo.enqueue_message(notification_id, message)))
        else:
            missing = [f for f in ("notification_id", "to", "subject") if getattr(args, f) is None]
            if missing:
                raise InvalidInput(
                    "enqueue needs " + ", ".join("--" + m.replace("_", "-") for m in missing) + " (or --json)"
                )
            results.append((args.notification_id, _enqueue_flags(repo, args)))
    for notification_id, result in results:
        if result.attempt_id is None:
            print(f"{visible(notification_id)}: duplicate of an email deleted by retention (no row left)")
            continue
        kind = "duplicate of" if result.duplicate else "enqueued as"
        print(f"{visible(notification_id)}: {kind} id {result.attempt_id}")
    return EXIT_OK if any(not r.duplicate for _, r in results) or not results else EXIT_NOTHING


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    p.add_argument("--priority", type=int, help="0-9, higher is claimed first; default 5")
    p.add_argument("--tenant", help="the tenant to send as (default: the account's default tenant)")
    p.add_argument("--expires-at", help="ISO time; not sent by then, it ends Failed 'Expired'")
    p.add_argument(
        "--json",
        dest="json_file",
        help="a JSON file ('-' for stdin): one message document of email_enqueue_message plus its"
        " notification_id, or a list of them (docs/procedures.md)",
    )
    p.set_defaults(func=cmd_enqueue)
