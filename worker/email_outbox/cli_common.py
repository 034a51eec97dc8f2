"""What every `email-outbox` subcommand shares: exit codes and the DSN flag."""

from __future__ import annotations

import argparse
import os

from email_outbox.dsn import DatabaseDsn
from email_outbox.errors import ConfigError

EXIT_OK, EXIT_NOTHING, EXIT_USAGE = 0, 1, 2


def add_dsn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dsn", help="mysql://user:password@host:port/database (default: $EMAIL_OUTBOX_DSN)")


def dsn_from(args: argparse.Namespace) -> DatabaseDsn:
    value = args.dsn or os.environ.get("EMAIL_OUTBOX_DSN")
    if not value:
        raise ConfigError(
            "no database: pass --dsn or set EMAIL_OUTBOX_DSN (mysql://user:password@host:port/db)"
        )
    return DatabaseDsn.parse(value)
