"""`email-outbox retention` and `email-outbox erase`: deleting old terminal emails, and removing one
person's address from every outbox table (docs/operations.md, "Retention and erasure").

`retention` calls email_retention once per batch, each call its own short transaction, until the run
is done; the procedure keeps the run (who, when, cutoff, count) in email_retention_runs. `erase` is one
call of email_erase_address; rows a worker is sending at that moment are left alone, and the command
says so and exits 3 (run it again once they are done).
"""

from __future__ import annotations

import argparse
import sys
import time

from email_outbox.cli.common import EXIT_INCOMPLETE, EXIT_OK, add_dsn, open_repository
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput, TransientDatabaseError
from email_outbox.models import RetentionBatch

# A batch rolled back by a deadlock or a lock wait timeout is simply run again; the run goes on.
BATCH_RETRIES = 5
# The sleep between batches unless --pause-ms says otherwise. Retention is background work that is
# never in a hurry (at 1,000 rows per batch this still deletes millions of rows an hour), while the
# claims beside it are: unpaced, a run took the senders' send rate to 0.61 of its value on a 2-core
# server, paced like this to 0.92 (docs/performance.md, "Retention beside two sending workers").
DEFAULT_PAUSE_MS = 300


def _batch(repo: OutboxRepository, args: argparse.Namespace) -> tuple[RetentionBatch, int]:
    """One batch, and how many times it was run again (printed: a rate of deadlocks worth seeing)."""
    for attempt in range(BATCH_RETRIES):
        try:
            return repo.retention(args.older_than_days, args.keep_ids_days, args.batch_size, args.by), attempt
        except TransientDatabaseError:
            if attempt == BATCH_RETRIES - 1:
                raise
            time.sleep(0.1 * 2**attempt)
    raise AssertionError("unreachable")


def _preview(repo: OutboxRepository, args: argparse.Namespace) -> int:
    preview = repo.retention_preview(args.older_than_days)
    oldest = (
        f"; the oldest changed {preview.oldest_final_at:%Y-%m-%d %H:%M:%S} UTC"
        if preview.oldest_final_at
        else ""
    )
    print(
        f"would delete {preview.would_delete} emails last changed before {preview.cutoff:%Y-%m-%d %H:%M:%S} UTC"
        f" ({preview.under_a_day_old} of them less than a day old){oldest}; nothing deleted (--dry-run)"
    )
    return EXIT_OK


def cmd_retention(args: argparse.Namespace) -> int:
    if not 1 <= args.batch_size <= 1000:
        raise InvalidInput("--batch-size must be 1 to 1000")
    if args.older_than_days < 1 and not (args.dry_run or args.including_recent):
        # 0 deletes every Sent and Failed email, seconds-old ones included: a typo for 30 must not.
        raise InvalidInput(
            "--older-than-days under 1 deletes emails finished seconds ago: look first with --dry-run,"
            " then say --including-recent"
        )
    if args.dry_run:
        with open_repository(args) as repo:
            return _preview(repo, args)
    started = time.monotonic()
    deleted = expired = batches = retried = 0
    with open_repository(args) as repo:
        while True:
            batch, again = _batch(repo, args)
            retried += again
            deleted += batch.deleted
            expired += batch.tombstones_expired
            batches += 1
            if not batch.more:
                break
            if args.pause_ms:
                time.sleep(args.pause_ms / 1000)
    took = time.monotonic() - started
    print(
        f"deleted {deleted} emails last changed before {batch.cutoff:%Y-%m-%d %H:%M:%S} UTC"
        f" (older than {args.older_than_days} days) in {took:.1f}s, {batches} batches"
        f" ({retried} run again after a deadlock or lock wait timeout);"
        f" {expired} expired tombstones dropped; run {batch.run_id} in email_retention_runs"
    )
    return EXIT_OK


def cmd_erase(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        result = repo.erase_address(args.address, args.by, args.reason)
    print(
        f"erased {result.erased} emails and {result.provider_events} provider events;"
        f" suppression entry {'kept as a keyed hash' if result.suppression_entries else 'none'}"
    )
    if result.processing:
        print(
            f"{result.processing} emails to this address are being sent (Processing) and were not touched:"
            " run the same erase again once they are done",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
    return EXIT_OK


def cmd_erasure_key_rotate(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        key_id, held = repo.rotate_erasure_key(args.by, args.reason)
    print(
        f"erasure key {key_id} made by the server and used from now on; {held} keys held"
        " (older ones still read until dropped: docs/security.md)"
    )
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "retention",
        help="delete Sent/Failed emails older than N days, with their history (ids stay duplicates)",
    )
    add_dsn(p)
    p.add_argument("--older-than-days", type=int, required=True, help="final transition at least this old")
    p.add_argument(
        "--keep-ids-days",
        type=int,
        default=None,
        help="a deleted email's notification id stays a duplicate this long after its final transition"
        " (default 400; at least --older-than-days, and at least 30)",
    )
    p.add_argument("--batch-size", type=int, default=1000, help="rows per transaction (1 to 1000)")
    p.add_argument(
        "--pause-ms",
        type=int,
        default=DEFAULT_PAUSE_MS,
        help=f"sleep between batches, to leave the server room (default {DEFAULT_PAUSE_MS}; 0: none)",
    )
    p.add_argument("--by", required=True, help="your name (or the job's), written to email_retention_runs")
    p.add_argument("--dry-run", action="store_true", help="count what would be deleted; delete nothing")
    p.add_argument(
        "--including-recent",
        action="store_true",
        help="allow --older-than-days 0 (every finished email, seconds-old ones included)",
    )
    p.set_defaults(func=cmd_retention)

    p = sub.add_parser("erase", help="remove one address from every outbox table (it stays suppressed)")
    add_dsn(p)
    p.add_argument("--address", required=True, help="the address to erase, any case")
    p.add_argument("--by", required=True, help="your name, written to the audit trail")
    p.add_argument("--reason", required=True, help="why (e.g. a ticket number; not the address)")
    p.set_defaults(func=cmd_erase)

    p = sub.add_parser("erasure-key", help="the keys erased addresses and deleted ids are kept by")
    keys = p.add_subparsers(dest="erasure_key_command", required=True)
    p = keys.add_parser("rotate", help="add a key the server makes; new tombstones and erasures use it")
    add_dsn(p)
    p.add_argument("--by", required=True, help="your name, written beside the key")
    p.add_argument("--reason", required=True, help="why (e.g. a suspected exposure of a backup)")
    p.set_defaults(func=cmd_erasure_key_rotate)
