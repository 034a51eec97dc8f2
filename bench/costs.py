"""Bounded cost, measured (security review, finding 7): the replicas' queue gauge and `purge-bodies` against
the size of the history.

Prints, for a table holding N terminal rows (10,000 and 1,000,000 by default):
- email_outbox_queue_stats (what every worker replica reads for /metrics) and email_outbox_stats
  (the operator's full count), median of repeated calls;
- a whole `purge-bodies` run over every terminal row, with the first and last batch's time: equal
  batch times mean each batch starts where the last stopped (linear), growing ones mean rescans.

    python bench/costs.py            # 10k and 1M rows (a few minutes)
    python bench/costs.py --tiny     # the form `make test` runs
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import migrate_for_local_use

T = TypeVar("T")
DIGITS = "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"


def fill_terminal_rows(server: PrivateServer, database: str, rows: int, start: int = 0) -> None:
    """`rows` Sent rows with small bodies, last changed 40 days ago, in chunks of up to 100,000."""
    conn = mysql.connector.connect(
        host="127.0.0.1", port=server.port, user="root", database=database, autocommit=True
    )
    cursor = conn.cursor()
    done = 0
    while done < rows:
        chunk = min(100_000, rows - done)
        cursor.execute(
            "INSERT INTO email_delivery_attempts (notification_id, to_address, subject, text_body, status,"
            " attempt_count, max_attempts, next_attempt_at, provider_message_id, sent_at, created_at, updated_at)"
            " SELECT CONCAT('hist-', %s + n), 'a@example.com', 'history', REPEAT('x', 200), 'Sent', 1, 5,"
            "  UTC_TIMESTAMP(6) - INTERVAL 40 DAY, CONCAT('m-', n), UTC_TIMESTAMP(6) - INTERVAL 40 DAY,"
            "  UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6) - INTERVAL 40 DAY"
            f" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d AS n FROM {DIGITS} a, {DIGITS} b,"
            f" {DIGITS} c, {DIGITS} e, {DIGITS} f) seq WHERE n < %s",
            (start + done, chunk),
        )
        done += chunk
    conn.close()


def median_ms(call: object, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()  # type: ignore[operator]
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


def new_database(server: PrivateServer, name: str) -> DatabaseDsn:
    """A migrated database of its own on the bench's private server."""
    conn = mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
    conn.cursor().execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    conn.close()
    dsn = DatabaseDsn.parse(server.dsn(name))
    migrate_for_local_use(dsn)
    return dsn


def on_private_server(
    prefix: str, sizes: tuple[int, ...], measure: Callable[[PrivateServer, int], T]
) -> dict[int, T]:
    """`measure` for each size, on one private server with a 1 GB buffer pool."""
    with tempfile.TemporaryDirectory(prefix=prefix) as base:
        server = PrivateServer(Path(base) / "db", extra_args=["--innodb-buffer-pool-size=1G"])
        server.start()
        try:
            return {rows: measure(server, rows) for rows in sizes}
        finally:
            server.stop()


def measure(server: PrivateServer, rows: int, repeat: int) -> dict[str, float]:
    name = f"costs_{rows}"
    dsn = new_database(server, name)
    fill_terminal_rows(server, name, rows)
    repo = OutboxRepository.open(dsn)
    for i in range(50):  # a live backlog beside the history
        repo.enqueue(f"live-{i}", "b@example.com", "live", text_body="x")
    figures = {
        "queue_stats_ms": median_ms(repo.queue_stats, repeat),
        "full_stats_ms": median_ms(repo.outbox_stats, max(3, repeat // 5)),
    }
    batch_ms: list[float] = []
    total = 0
    t0 = time.perf_counter()
    after_id = 0
    while True:
        b0 = time.perf_counter()
        affected, after_id = repo.purge_bodies_after(30, after_id, 1000)
        batch_ms.append((time.perf_counter() - b0) * 1000)
        total += affected
        if affected < 1000:
            break
    figures["purge_total_s"] = time.perf_counter() - t0
    figures["purged_rows"] = total
    figures["purge_first_batch_ms"] = batch_ms[0]
    full = batch_ms[:-1] or batch_ms
    figures["purge_last_full_batch_ms"] = full[-1]
    repo.close()
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2,000 and 20,000 rows: a smoke run")
    args = parser.parse_args(argv)
    sizes = (2_000, 20_000) if args.tiny else (10_000, 1_000_000)
    repeat = 5 if args.tiny else 30
    results = on_private_server("costs-", sizes, lambda server, rows: measure(server, rows, repeat))
    print(f"{'terminal rows':>14} | {'queue gauge (ms)':>16} | {'full stats (ms)':>15} | "
          f"{'purge all (s)':>13} | {'rows purged':>11} | {'first/last batch (ms)':>21}")  # fmt: skip
    for rows, f in results.items():
        print(
            f"{rows:>14,} | {f['queue_stats_ms']:>16.2f} | {f['full_stats_ms']:>15.1f} | {f['purge_total_s']:>13.1f} |"
            f" {int(f['purged_rows']):>11,} | {f['purge_first_batch_ms']:>9.1f} / {f['purge_last_full_batch_ms']:<9.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
