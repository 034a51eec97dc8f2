"""The `email-outbox` command: migrate, worker, and the operator commands.

Exit codes: 0 done, 1 nothing matched or refused, 2 usage or input error. Errors are one line on
stderr; --debug shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from email_outbox import operator_cli, senders_cli
from email_outbox.cli_common import EXIT_NOTHING, EXIT_OK, EXIT_USAGE, add_dsn, dsn_from
from email_outbox.display import visible
from email_outbox.dsn import resolve_dsn_text
from email_outbox.errors import ConfigError, InvalidInput, OutboxError


def cmd_migrate(args: argparse.Namespace) -> int:
    from email_outbox.migrate import migrate

    dsn = dsn_from(args)
    print(f"migrating {dsn.redacted()}")
    report = migrate(dsn, lock_timeout=args.lock_timeout, progress=lambda line: print(line, flush=True))
    for line in report.lines():
        print(line)
    return EXIT_OK


def cmd_worker(args: argparse.Namespace) -> int:
    from email_outbox.config import load_config
    from email_outbox.logs import configure_logging
    from email_outbox.memory import return_large_blocks_to_the_system
    from email_outbox.ses import SesSender
    from email_outbox.worker import Worker

    flags = {k: v for k, v in vars(args).items() if k in WORKER_FLAGS and v is not None}
    dsn_text = resolve_dsn_text(args.dsn, args.dsn_file)
    if dsn_text:
        flags["dsn"] = dsn_text
    if args.disable_provider:
        flags["provider_enabled"] = False
    config = load_config(flags)
    configure_logging(config.log_format)
    return_large_blocks_to_the_system()
    worker = Worker(config, SesSender(config))
    worker.install_signal_handlers()
    return worker.run()


WORKER_FLAGS = {
    "dsn": "database DSN ($EMAIL_OUTBOX_DSN)",
    "default_from": "sender for rows with no from_address ($EMAIL_OUTBOX_DEFAULT_FROM)",
    "worker_id": "this replica's name in claimed_by (default host:pid)",
    "lease_seconds": "claim lease (default 120)",
    "concurrency": "in-flight sends per replica (default 8)",
    "batch_size": "rows per claim, at most the free send slots (default 8)",
    "poll_interval": "longest idle wait between claims, seconds (default 1)",
    "max_send_rate": "sends per second for this replica (default unlimited)",
    "retry_base_seconds": "backoff base for transient failures (default 5)",
    "retry_max_seconds": "backoff cap (default 900)",
    "ses_configuration_set": "SES configuration set for every send",
    "ses_connect_timeout": "seconds (default 5)",
    "ses_read_timeout": "seconds (default 20)",
    "shutdown_grace_seconds": "how long SIGTERM waits for in-flight sends (default 30)",
    "throttle_delay_seconds": "release delay after SES throttling (default 5)",
    "account_pause_seconds": "pause after an account/config error (default 60)",
    "log_format": "text or json (default text)",
    "metrics_port": "serve /metrics and /healthz on this port (default off)",
    "metrics_host": "address the metrics server binds (default 127.0.0.1; 0.0.0.0 exposes it to the network)",
    "stats_interval": "seconds between queue-depth reads for /metrics (default 15)",
    "health_stale_seconds": "/healthz turns 503 when the loop or the database is silent this long (default 30)",
    "inline_body_bytes": "bodies up to this size come with the claim; larger ones are loaded per send (256 KiB)",
    "body_memory_bytes": "large bodies held at once by all sends of this replica (default 16 MiB)",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="email-outbox", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("migrate", help="apply schema migrations and install procedures/")
    add_dsn(p)
    p.add_argument("--lock-timeout", type=int, default=120, help="seconds to wait for another migrator")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("worker", help="deliver emails: claim, send through SES, finalize")
    for name, help_text in WORKER_FLAGS.items():
        p.add_argument("--" + name.replace("_", "-"), dest=name, help=help_text)
    p.add_argument(
        "--dsn-file", help="a file holding the DSN, so no password sits in argv ($EMAIL_OUTBOX_DSN_FILE)"
    )
    p.add_argument(
        "--disable-provider",
        action="store_true",
        help="send nothing: release every claim untouched ($EMAIL_OUTBOX_PROVIDER_ENABLED=false)",
    )
    p.set_defaults(func=cmd_worker)

    operator_cli.register(sub)
    senders_cli.register(sub)
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


if __name__ == "__main__":
    sys.exit(main())
