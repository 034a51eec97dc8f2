"""`email-outbox events`: record SES events from an SQS queue (long poll, until SIGTERM) or from a
file once (`--from-file PATH`, `-` for stdin). docs/events.md has the wiring in AWS."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from types import FrameType

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, dsn_from
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput
from email_outbox.events.files import messages_in
from email_outbox.events.ingest import Ingestor, Tally
from email_outbox.tracing.setup import configure_from_environment


def _stop_on_sigterm(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def cmd_events(args: argparse.Namespace) -> int:
    from email_outbox.logs import configure_logging

    if (args.sqs_queue_url is None) == (args.from_file is None):
        raise InvalidInput("events takes --sqs-queue-url URL or --from-file PATH, one of the two")
    if not 1 <= args.batch_size <= 1000:
        raise InvalidInput("--batch-size must be 1 to 1000")
    if not 0 <= args.wait_seconds <= 20:
        raise InvalidInput("--wait-seconds must be 0 to 20 (SQS's long-poll limit)")
    if not 1 <= args.visibility_timeout <= 43200:
        raise InvalidInput(
            "--visibility-timeout must be 1 to 43200 seconds (it is extended every third of it while a"
            " batch is recorded; SQS's limit is 12 hours)"
        )
    if args.sqs_queue_url is not None:
        # The long-running service logs in the worker's format; a one-shot --from-file run keeps
        # Python's own handling (warnings to the stderr of the moment).
        configure_logging(args.log_format)
    dsn = dsn_from(args)
    end_tracing = configure_from_environment("email-outbox-events")
    try:
        return _consume(args, dsn)
    finally:
        end_tracing()


def _consume(args: argparse.Namespace, dsn: DatabaseDsn) -> int:
    from email_outbox.events.sqs import SqsConsumer, SqsOptions

    consumer_id = args.consumer_id or f"events@{socket.gethostname()}:{os.getpid()}"
    stop = threading.Event()
    _stop_on_sigterm(stop)
    tally = Tally()

    def open_repository() -> OutboxRepository:
        return OutboxRepository.open(dsn)

    if args.metrics_port is not None:
        from email_outbox.events.metrics import serve

        serve(args.metrics_host, args.metrics_port, tally, open_repository, stop)
    if args.from_file is not None:
        return _from_file(args.from_file, open_repository(), consumer_id, tally, args.batch_size, stop)
    consumer = SqsConsumer(
        open_repository,
        consumer_id,
        SqsOptions(
            queue_url=args.sqs_queue_url,
            wait_seconds=args.wait_seconds,
            visibility_timeout=args.visibility_timeout,
            batch_size=args.batch_size,
            delete_malformed=args.delete_malformed,
        ),
        stop,
        tally=tally,
    )
    try:
        code = consumer.run()
    finally:
        consumer.close()
    print(tally.line(), file=sys.stderr)
    return code


def _from_file(
    path: str, repo: OutboxRepository, consumer_id: str, tally: Tally, batch_size: int, stop: threading.Event
) -> int:
    ingestor = Ingestor(repo, consumer_id, tally)
    try:
        batch: list[str] = []
        for message in messages_in(path):
            batch.append(message)
            if len(batch) >= batch_size:
                ingestor.ingest(batch)
                batch = []
                if stop.is_set():
                    break
        if batch:
            ingestor.ingest(batch)
        settled = repo.resolve_unknown_from_evidence(10_000, consumer_id)
        if settled:
            tally.resolved["late evidence"] += settled
    finally:
        repo.close()
    print(tally.line())
    return EXIT_OK if not tally.malformed else EXIT_NOTHING


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("events", help="record SES events (SQS or a file): delivery state, suppression")
    add_dsn(p)
    source = p.add_mutually_exclusive_group()
    source.add_argument("--sqs-queue-url", help="long-poll this SQS queue until SIGTERM")
    source.add_argument("--from-file", help="JSON lines or one JSON array of messages; - for stdin")
    p.add_argument("--consumer-id", help="the name written to audit events (default events@host:pid)")
    p.add_argument("--batch-size", type=int, default=100, help="messages per database transaction")
    p.add_argument("--wait-seconds", type=int, default=20, help="SQS long-poll wait, 0 to 20")
    p.add_argument(
        "--visibility-timeout",
        type=int,
        default=120,
        help="seconds a received message stays hidden, 1 to 43200 (extended while its batch is recorded)",
    )
    p.add_argument(
        "--delete-malformed",
        action="store_true",
        help="delete messages that cannot be read (default: leave them for the queue's dead-letter queue)",
    )
    p.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port")
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="address /metrics binds (default 127.0.0.1; 0.0.0.0 exposes it)",
    )
    p.add_argument("--log-format", choices=["text", "json"], default="text")
    p.set_defaults(func=cmd_events)
