"""What every `email-outbox` subcommand shares: exit codes, the DSN flag, durations and times."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from email_outbox.db.dsn import DatabaseDsn, resolve_dsn_text
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import ConfigError, InvalidInput

EXIT_OK, EXIT_NOTHING, EXIT_USAGE = 0, 1, 2
# Done in part, the rest refused for now (`erase` found rows a worker is sending): run it again later.
EXIT_INCOMPLETE = 3


def add_dsn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dsn-file",
        help="a file holding mysql://user:password@host:port/database (default: $EMAIL_OUTBOX_DSN_FILE)",
    )
    parser.add_argument(
        "--dsn",
        help="mysql://user@host:port/database; a password here is visible in `ps`: prefer --dsn-file"
        " or $EMAIL_OUTBOX_DSN",
    )


def dsn_from(args: argparse.Namespace) -> DatabaseDsn:
    value = resolve_dsn_text(args.dsn, args.dsn_file)
    if not value:
        raise ConfigError(
            "no database: pass --dsn-file PATH or set EMAIL_OUTBOX_DSN (mysql://user:password@host:port/db)"
        )
    return DatabaseDsn.parse(value)


@contextmanager
def open_repository(args: argparse.Namespace) -> Iterator[OutboxRepository]:
    """The repository a command works through, reading consistently (causal reads on a Galera node)."""
    repo = OutboxRepository.open(dsn_from(args))
    try:
        repo.read_consistently()
        yield repo
    finally:
        repo.close()


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
DAY_SECONDS = 86_400


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
