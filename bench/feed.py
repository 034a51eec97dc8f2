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

import mysql.connector
from costs import DIGITS, median_ms, new_database, on_private_server

from email_outbox import Message, enqueue_message
from email_outbox.changes import read_changes
from email_outbox_devtools.dbserver import PrivateServer

PAGE = 100


def fill_history(cursor: object, rows: int) -> None:
    """`rows` Sent emails, each with one positioned status change; odd ones are another account's."""
    done = 0
    while done < rows:
        chunk = min(100_000, rows - done)
        cursor.execute(  # type: ignore[attr-defined]
            "INSERT INTO email_delivery_attempts (account, notification_id, to_address, subject, text_body, status,"
            " attempt_count, max_attempts, next_attempt_at, provider_message_id, sent_at, created_at, updated_at)"
            " SELECT IF(n % 2 = 0, 'root', 'other'), CONCAT('hist-', %s + n), 'a@example.com', 'history', 'x',"
            "  'Sent', 1, 5, UTC_TIMESTAMP(6), CONCAT('m-', n), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)"
            f" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d AS n FROM {DIGITS} a, {DIGITS} b,"
            f" {DIGITS} c, {DIGITS} e, {DIGITS} f) seq WHERE n < %s",
            (done, chunk),
        )
        done += chunk
    cursor.execute(  # type: ignore[attr-defined]
        "INSERT INTO email_delivery_events (attempt_id, occurred_at, from_status, to_status, actor, feed_seq)"
        " SELECT id, created_at, 'Processing', 'Sent', 'bench', id FROM email_delivery_attempts"
    )
    cursor.execute(  # type: ignore[attr-defined]
        "INSERT INTO email_changes_feed (seq, account, attempt_id, source, source_id)"
        " SELECT e.feed_seq, a.account, a.id, 'status', e.id"
        " FROM email_delivery_events e JOIN email_delivery_attempts a ON a.id = e.attempt_id"
    )
    cursor.execute(  # type: ignore[attr-defined]
        "INSERT INTO email_changes_state (id, last_seq) SELECT 1, MAX(seq) FROM email_changes_feed"
        " ON DUPLICATE KEY UPDATE last_seq = VALUES(last_seq)"
    )


def measure(server: PrivateServer, rows: int, repeat: int) -> dict[str, float]:
    dsn = new_database(server, f"feed_{rows}")
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    fill_history(conn.cursor(), rows)
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
    for round_ in range(max(3, repeat // 3)):
        for i in range(PAGE):
            enqueue_message(conn, f"live-{round_}-{i}", message)
        t0 = time.perf_counter()
        page = read_changes(conn, cursor, PAGE)
        samples.append((time.perf_counter() - t0) * 1000)
        assert len(page.changes) == PAGE, f"expected {PAGE} new changes, read {len(page.changes)}"
        cursor = page.next_cursor
    figures["sequence_and_read_ms"] = statistics.median(samples)
    conn.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2,000 and 20,000 changes: a smoke run")
    args = parser.parse_args(argv)
    sizes = (2_000, 20_000) if args.tiny else (10_000, 1_000_000)
    repeat = 5 if args.tiny else 30
    results = on_private_server("feed-", sizes, lambda server, rows: measure(server, rows, repeat))
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
