"""The priority claim against the size of the history (issue 26): the claim's plan and its time.

For a table holding N terminal rows (10,000 and 1,000,000 by default) and a due backlog of 10,000
rows, prints the plan of the claim's locking scan (procedures/source/fragments/claim_batch.sql) (EXPLAIN and MariaDB's ANALYZE:
index, access type, estimated and real rows read, no sort) and the median and p99 of an 8-row
email_claim_batch_bounded (each batch released again, so the backlog stays), once with the backlog spread
over priorities 0-9 and once with every row at 9 (what an operator who sends everything at 9 gets).

    python bench/claim_priority.py            # 10k and 1M rows (a few minutes)
    python bench/claim_priority.py --tiny     # the form `make test` runs
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from costs import DIGITS, fill_terminal_rows, new_database

from email_outbox.db.repository import OutboxRepository
from email_outbox_devtools.dbserver import PrivateServer

BACKLOG = 10_000
# The locking scan as the claim (procedures/source/fragments/claim_batch.sql) ran it before tenants (its FORCE INDEX included).
CLAIM_SCAN = (
    "SELECT id, status FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_queue)"
    " WHERE claim_queue_rank IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)"
    " AND claim_due_at <= UTC_TIMESTAMP(6) AND attempt_count < max_attempts"
    " ORDER BY claim_queue_rank, claim_due_at, id LIMIT 8"
)


def add_backlog(repo: OutboxRepository, rows: int) -> None:
    """`rows` due Pending rows, priority id % 10, due over the last hour."""
    cursor = repo.connection.cursor()
    cursor.execute(
        "INSERT INTO email_delivery_attempts (notification_id, to_address, subject, text_body, status,"
        " attempt_count, max_attempts, next_attempt_at, created_at, updated_at, priority)"
        " SELECT CONCAT('due-', n), 'b@example.com', 'due', 'x', 'Pending', 0, 5,"
        "  UTC_TIMESTAMP(6) - INTERVAL (n DIV 3) SECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), n % 10"
        f" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d AS n FROM {DIGITS} a, {DIGITS} b, {DIGITS} c,"
        f" {DIGITS} e) seq WHERE n < %s",
        (rows,),
    )
    cursor.execute("ANALYZE TABLE email_delivery_attempts")
    cursor.fetchall()
    cursor.close()


def plan(repo: OutboxRepository, scan: str = CLAIM_SCAN) -> dict[str, Any]:
    """The plan of the claim's locking read `scan` (EXPLAIN), and the rows it read (ANALYZE)."""
    cursor = repo.connection.cursor(dictionary=True)
    cursor.execute("EXPLAIN " + scan)
    (explain,) = cursor.fetchall()
    cursor.execute("ANALYZE FORMAT=JSON " + scan)
    analyzed = json.loads(cursor.fetchall()[0]["ANALYZE"])
    cursor.close()
    table = analyzed["query_block"].get("table") or analyzed["query_block"]["nested_loop"][0]["table"]
    return {
        "key": explain["key"],
        "type": explain["type"],
        "est_rows": int(explain["rows"]),
        "r_rows": float(table.get("r_rows", 0)),
        "sort": "filesort" in (explain["Extra"] or ""),
    }


def claim_times(
    repo: OutboxRepository, repeat: int, procedure: str = "email_claim_batch_bounded"
) -> list[float]:
    """ms of `repeat` claims of 8 (`procedure`: the worker's claim, or email_reserve_batch), each batch
    released again so the next finds the same backlog."""
    claim = repo.reserve_batch if procedure == "email_reserve_batch" else repo.claim_batch_bounded
    samples = []
    for _ in range(repeat):
        token = uuid.uuid4().hex
        t0 = time.perf_counter()
        rows = claim(token, "bench", 60, 8, 262_144)
        samples.append((time.perf_counter() - t0) * 1000)
        for row in rows:
            repo.release_claim(row.id, token, 0)
    return samples


def p50_p99(
    repo: OutboxRepository, repeat: int, procedure: str = "email_claim_batch_bounded"
) -> dict[str, float]:
    """The median and p99 ms of `repeat` claims (claim_times), after 5 that warm the path."""
    claim_times(repo, 5, procedure)
    samples = sorted(claim_times(repo, repeat, procedure))
    return {
        "p50": statistics.median(samples),
        "p99": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
    }


def measure(server: PrivateServer, rows: int, repeat: int) -> list[dict[str, Any]]:
    name = f"priority_{rows}"
    dsn = new_database(server, name)
    fill_terminal_rows(server, name, rows)
    repo = OutboxRepository.open(dsn)
    add_backlog(repo, BACKLOG)
    results = []
    for mix in ("0-9", "all 9"):
        if mix == "all 9":
            cursor = repo.connection.cursor()
            cursor.execute("UPDATE email_delivery_attempts SET priority = 9 WHERE status = 'Pending'")
            cursor.execute("ANALYZE TABLE email_delivery_attempts")
            cursor.fetchall()
            cursor.close()
        results.append({"rows": rows, "mix": mix, **plan(repo), **p50_p99(repo, repeat)})
    repo.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="2,000 and 20,000 rows: a smoke run")
    args = parser.parse_args(argv)
    sizes = (2_000, 20_000) if args.tiny else (10_000, 1_000_000)
    repeat = 20 if args.tiny else 300
    with tempfile.TemporaryDirectory(prefix="claim-priority-") as base:
        server = PrivateServer(Path(base) / "db", extra_args=["--innodb-buffer-pool-size=1G"])
        server.start()
        try:
            results = [r for rows in sizes for r in measure(server, rows, repeat)]
        finally:
            server.stop()
    print(f"claim scan: {CLAIM_SCAN}")
    print(f"due backlog: {BACKLOG:,} Pending rows")
    print(
        "| terminal rows | priorities | index | access | est. rows | rows read | sort | claim of 8, p50 | p99 |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['rows']:,} | {r['mix']} | {r['key']} | {r['type']} | {r['est_rows']:,} | {r['r_rows']:.0f} |"
            f" {'filesort' if r['sort'] else 'none'} | {r['p50']:.2f} ms | {r['p99']:.2f} ms |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
