"""The feed's cost against the size of the history (email_changes, issue 40).

For a history of N status changes (10,000 and 1,000,000 by default; half of them another account's),
all already positioned, prints the median time of:
- a read at the head: the 100 changes after a cursor near the end (a consumer keeping up);
- a read from the start: the first 100 changes (cursor 0);
- a read that first positions 100 new changes (enqueued since the last call) and then returns them.
Flat figures from the small history to the large one mean the cost follows the page, not the history.

    python bench/feed.py            # 10k and 1M changes (a few minutes)
    python bench/feed.py --tiny     # the form `make test` runs
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from typing import Any

import mysql.connector
from costs import DIGITS, median_ms, new_database, on_private_server

from email_outbox import Message, enqueue_message
from email_outbox.changes import read_changes
from email_outbox_devtools.dbserver import PrivateServer

PAGE = 100


def fill_history(cursor: Any, start: int, rows: int) -> None:
    """`rows` more Sent emails, each with one positioned status change; odd ones another account's."""
    cursor.execute("SELECT COALESCE(MAX(id), 0) FROM email_delivery_attempts")
    ((before,),) = cursor.fetchall()
    cursor.execute("SELECT last_seq FROM email_changes_state WHERE id = 1")
    ((last_seq,),) = cursor.fetchall()
    done = 0
    while done < rows:
        chunk = min(100_000, rows - done)
        cursor.execute(
            "INSERT INTO email_delivery_attempts (account, notification_id, to_address, subject, text_body, status,"
            " attempt_count, max_attempts, next_attempt_at, provider_message_id, sent_at, created_at, updated_at)"
            " SELECT IF(n % 2 = 0, 'root', 'other'), CONCAT('hist-', %s + n), 'a@example.com', 'history', 'x',"
            "  'Sent', 1, 5, UTC_TIMESTAMP(6), CONCAT('m-', n), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)"
            f" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d AS n FROM {DIGITS} a, {DIGITS} b,"
            f" {DIGITS} c, {DIGITS} e, {DIGITS} f) seq WHERE n < %s",
            (start + done, chunk),
        )
        done += chunk
    cursor.execute(
        "INSERT INTO email_delivery_events (attempt_id, occurred_at, from_status, to_status, actor, feed_seq)"
        " SELECT id, created_at, 'Processing', 'Sent', 'bench', %s + id - %s FROM email_delivery_attempts"
        " WHERE id > %s",
        (last_seq, before, before),
    )
    cursor.execute(
        "INSERT INTO email_changes_feed (seq, account, attempt_id, source, source_id)"
        " SELECT e.feed_seq, a.account, a.id, 'status', e.id"
        " FROM email_delivery_events e JOIN email_delivery_attempts a ON a.id = e.attempt_id WHERE e.feed_seq > %s",
        (last_seq,),
    )
    cursor.execute(
        "UPDATE email_changes_state SET last_seq = (SELECT MAX(seq) FROM email_changes_feed) WHERE id = 1"
    )


def measure(conn: Any, repeat: int) -> dict[str, float]:
    last = read_changes(conn, 0, 1).next_cursor
    while (page := read_changes(conn, last, 1000)).changes:
        last = page.next_cursor
    head = max(0, last - 2 * PAGE)
    figures = {
        "head_ms": median_ms(lambda: read_changes(conn, head, PAGE), repeat),
        "start_ms": median_ms(lambda: read_changes(conn, 0, PAGE), repeat),
    }
    samples = []
    cursor = read_changes(conn, head, 1000).next_cursor
    message = Message(to=["b@example.com"], subject="live", text="x")
    for _ in range(max(1, repeat // 3)):
        for _ in range(PAGE):
            enqueue_message(conn, f"live-{uuid.uuid4()}", message)
        t0 = time.perf_counter()
        page = read_changes(conn, cursor, PAGE)
        samples.append((time.perf_counter() - t0) * 1000)
        assert len(page.changes) == PAGE, f"expected {PAGE} new changes, read {len(page.changes)}"
        cursor = page.next_cursor
    figures["sequence_and_read_ms"] = statistics.median(samples)
    return figures


def measure_growing(
    server: PrivateServer, sizes: tuple[int, ...], repeat: int
) -> dict[int, dict[str, float]]:
    """One database whose history grows to each size in turn (one migration, not one per size)."""
    dsn = new_database(server, "feed")
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    results: dict[int, dict[str, float]] = {}
    filled = 0
    for rows in sizes:
        fill_history(conn.cursor(), filled, rows - filled)
        filled = rows
        results[rows] = measure(conn, repeat)
    conn.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2,000 and 20,000 changes: a smoke run")
    args = parser.parse_args(argv)
    sizes = (2_000, 20_000) if args.tiny else (10_000, 1_000_000)
    repeat = 3 if args.tiny else 30
    results = on_private_server("feed-", (0,), lambda server, _: measure_growing(server, sizes, repeat))[0]
    print(
        f"{'changes in history':>18} | {'read at the head (ms)':>21} | {'read from the start (ms)':>24} |"
        f" {'position 100 new + read (ms)':>28}"
    )
    for rows, f in results.items():
        print(
            f"{rows:>18,} | {f['head_ms']:>21.2f} | {f['start_ms']:>24.2f} | {f['sequence_and_read_ms']:>28.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
