"""The `email-outbox` command: migrate, worker, and the operator commands.

Exit codes: 0 done, 1 nothing matched or refused, 2 usage or input error. Errors are one line on
stderr; --debug shows the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from email_outbox.dsn import DatabaseDsn
from email_outbox.errors import ConfigError, InvalidInput, NotFound, OutboxError

EXIT_OK, EXIT_NOTHING, EXIT_USAGE = 0, 1, 2


def dsn_from(args: argparse.Namespace) -> DatabaseDsn:
    value = args.dsn or os.environ.get("EMAIL_OUTBOX_DSN")
    if not value:
        raise ConfigError("no database: pass --dsn or set EMAIL_OUTBOX_DSN (mysql://user:password@host:port/db)")
    return DatabaseDsn.parse(value)


def cmd_migrate(args: argparse.Namespace) -> int:
    from email_outbox.migrate import migrate

    dsn = dsn_from(args)
    print(f"migrating {dsn.redacted()}")
    report = migrate(dsn, lock_timeout=args.lock_timeout, progress=lambda line: print(line, flush=True))
    for line in report.lines():
        print(line)
    return EXIT_OK


def add_dsn(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dsn", help="mysql://user:password@host:port/database (default: $EMAIL_OUTBOX_DSN)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="email-outbox", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("migrate", help="apply schema migrations and install procedures/")
    add_dsn(p)
    p.add_argument("--lock-timeout", type=int, default=120, help="seconds to wait for another migrator")
    p.set_defaults(func=cmd_migrate)

    for register in _extra_commands:
        register(sub)
    return parser


_extra_commands: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ConfigError, InvalidInput) as exc:
        if args.debug:
            raise
        print(f"email-outbox: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NotFound as exc:
        if args.debug:
            raise
        print(f"email-outbox: {exc}", file=sys.stderr)
        return EXIT_NOTHING
    except OutboxError as exc:
        if args.debug:
            raise
        print(f"email-outbox: {exc}", file=sys.stderr)
        return EXIT_NOTHING
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
