"""What every `email-outbox` subcommand shares: exit codes, the DSN flag, durations and times."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from email_outbox.db.dsn import DatabaseDsn, resolve_dsn_text
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import ConfigError, InvalidInput
from email_outbox.operator_text import is_duration, parse_duration

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


DAY_SECONDS = 86_400


def parse_since(text: str, now: datetime) -> datetime:
    """An ISO time (UTC when no offset is given) or a duration back from the database clock."""
    if is_duration(text):
        return now - timedelta(seconds=parse_duration(text))
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"--since takes an ISO time or a duration (got {text!r})") from None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value
