"""The `email-outbox` command: migrate, worker, and the operator commands.

Exit codes: 0 done, 1 nothing matched or refused, 2 usage or input error, 3 done in part (`erase`:
rows being sent were left alone; run it again). Errors are one line on
stderr; --debug shows the traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from email_outbox.cli import actions as actions_cli
from email_outbox.cli import breaker as breaker_cli
from email_outbox.cli import changes as changes_cli
from email_outbox.cli import configuration_sets as configuration_sets_cli
from email_outbox.cli import console as console_cli
from email_outbox.cli import enqueue as enqueue_cli
from email_outbox.cli import events as events_cli
from email_outbox.cli import grant as grant_cli
from email_outbox.cli import inspect as inspect_cli
from email_outbox.cli import retention as retention_cli
from email_outbox.cli import senders as senders_cli
from email_outbox.cli import suppression as suppression_cli
from email_outbox.cli import tenants as tenants_cli
from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, EXIT_USAGE, add_dsn, dsn_from
from email_outbox.db.dsn import resolve_dsn_text
from email_outbox.display import visible
from email_outbox.errors import ConfigError, InvalidInput, OutboxError
from email_outbox.tracing.setup import configure_from_environment
from email_outbox.version import PACKAGE_VERSION
from email_outbox.worker.config import SETTINGS, flag_help


def cmd_migrate(args: argparse.Namespace) -> int:
    from email_outbox.schema.migrate import migrate

    dsn = dsn_from(args)
    print(f"migrating {dsn.redacted()}")
    report = migrate(dsn, lock_timeout=args.lock_timeout, progress=lambda line: print(line, flush=True))
    for line in report.lines(verbose=args.verbose):
        print(line)
    return EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    from email_outbox.logs import configure_logging
    from email_outbox.ses.account import SesAccount
    from email_outbox.ses.sender import SesSender
    from email_outbox.worker import Worker
    from email_outbox.worker.config import load_config
    from email_outbox.worker.memory import return_large_blocks_to_the_system

    names = {s.name for s in SETTINGS}
    flags = {k: v for k, v in vars(args).items() if k in names and v is not None}
    dsn_text = resolve_dsn_text(args.dsn, args.dsn_file)
    if dsn_text:
        flags["dsn"] = dsn_text
    if args.disable_provider:
        flags["provider_enabled"] = False
    config = load_config(flags)
    configure_logging(config.log_format, logging.getLevelNamesMapping()[config.log_level.upper()])
    return_large_blocks_to_the_system()
    sender = SesSender(config)
    worker = Worker(config, sender, account=SesAccount(sender.client))
    worker.install_signal_handlers()
    end_tracing = configure_from_environment("email-outbox-worker")
    try:
        code = worker.run()
    finally:
        end_tracing()
    stuck = worker.threads_left()
    if stuck:
        # The interpreter would join them at exit, for as long as their calls take: their rows are
        # logged and left to the lease sweep (UnknownOutcome, never resent).
        logging.getLogger("email_outbox.worker").error(
            "exiting without waiting for threads still in a call",
            extra={"threads": stuck, **worker.rows_left()},
        )
        logging.shutdown()
        os._exit(code)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="email-outbox", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"email-outbox {PACKAGE_VERSION}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("migrate", help="apply schema migrations and install procedures/")
    add_dsn(p)
    p.add_argument("--lock-timeout", type=int, default=120, help="seconds to wait for another migrator")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="name every migration and procedure installed"
    )
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("worker", help="deliver emails: claim, send through SES, finalize")
    for setting in SETTINGS:
        p.add_argument("--" + setting.name.replace("_", "-"), dest=setting.name, help=flag_help(setting))
    p.add_argument(
        "--dsn-file", help="a file holding the DSN, so no password sits in argv ($EMAIL_OUTBOX_DSN_FILE)"
    )
    p.add_argument(
        "--disable-provider",
        action="store_true",
        help="send nothing: claim nothing and idle ($EMAIL_OUTBOX_PROVIDER_ENABLED=false)",
    )
    p.set_defaults(func=cmd_worker)

    inspect_cli.register(sub)
    actions_cli.register(sub)
    breaker_cli.register(sub)
    enqueue_cli.register(sub)
    grant_cli.register(sub)
    senders_cli.register(sub)
    tenants_cli.register(sub)
    configuration_sets_cli.register(sub)
    events_cli.register(sub)
    suppression_cli.register(sub)
    retention_cli.register(sub)
    console_cli.register(sub)
    changes_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except OutboxError as exc:
        if args.debug:
            raise
        print(f"email-outbox: {visible(str(exc))}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, (ConfigError, InvalidInput)) else EXIT_NOTHING
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader stopped early (`list | head`): what it read is what it wanted. Python would
        # report the pipe again when it flushes stdout at exit, so stdout goes to /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
