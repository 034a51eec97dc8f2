"""`email-outbox enqueue`: an ad-hoc email, from flags or from a JSON document (one object or a list),
through email_enqueue like any other enqueuing service."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from email_outbox.cli_common import EXIT_NOTHING, EXIT_OK, add_dsn, open_repository
from email_outbox.display import visible
from email_outbox.errors import InvalidInput


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
    with open_repository(args) as repo:
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
    p.add_argument(
        "--json",
        dest="json_file",
        help="a JSON file ('-' for stdin): keys " + ", ".join(sorted(_ENQUEUE_KEYS)),
    )
    p.set_defaults(func=cmd_enqueue)
