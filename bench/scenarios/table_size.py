"""Table size: the claim rate (claims/s, p50/p99) with an empty table and with many terminal rows."""

from __future__ import annotations

import time
import uuid
from typing import Any

import mysql.connector
from harness import Bench, enqueue_bulk, percentile

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository

FILL_COLUMNS = (
    "notification_id, to_address, subject, text_body, status, attempt_count, max_attempts,"
    " next_attempt_at, sent_at, provider_message_id, created_at, updated_at"
)
FILL_VALUES = (
    "CONCAT('hist-', {start} + seq), 'old@example.com', 's', 't', 'Sent', 1, 5,"
    " UTC_TIMESTAMP(6) - INTERVAL 30 DAY, UTC_TIMESTAMP(6) - INTERVAL 30 DAY, 'm',"
    " UTC_TIMESTAMP(6) - INTERVAL 30 DAY, UTC_TIMESTAMP(6) - INTERVAL 30 DAY"
)


def fill_terminal_rows(dsn: DatabaseDsn, n: int) -> None:
    """History rows straight into the table (a fixture, not a transition): Sent, a month ago."""
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT VERSION()")
    mariadb = "mariadb" in str(cur.fetchone()[0]).lower()  # type: ignore[index]
    chunk = 50_000
    for start in range(0, n, chunk):
        last = min(chunk, n - start) - 1
        values = FILL_VALUES.format(start=int(start))
        if mariadb:  # the sequence engine
            sql = f"INSERT INTO email_delivery_attempts ({FILL_COLUMNS}) SELECT {values} FROM seq_0_to_{last}"
        else:  # MySQL 8: a recursive CTE
            cur.execute(f"SET SESSION cte_max_recursion_depth = {chunk + 1}")
            sql = (
                f"INSERT INTO email_delivery_attempts ({FILL_COLUMNS}) WITH RECURSIVE s(seq) AS"
                f" (SELECT 0 UNION ALL SELECT seq + 1 FROM s WHERE seq < {last}) SELECT {values} FROM s"
            )
        cur.execute(sql)
    cur.execute("ANALYZE TABLE email_delivery_attempts")
    cur.fetchall()
    conn.close()


def settle(bench: Bench, timeout: float = 180) -> float:
    """Wait until InnoDB has flushed and purged what the fixtures wrote (dirty pages under 1% of the
    pool, purge history under 1,000), so each table is measured as it stands in steady state and not
    while the server is still writing back a million inserted rows. Returns the seconds waited."""
    conn = mysql.connector.connect(host="127.0.0.1", port=bench.server.port, user="root", autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT @@GLOBAL.innodb_max_dirty_pages_pct")
    (pct,) = cur.fetchone()  # type: ignore[misc]
    cur.execute("SET GLOBAL innodb_max_dirty_pages_pct = 0")  # the page cleaner flushes at full speed
    started = time.monotonic()
    try:
        while time.monotonic() - started < timeout:
            dirty = bench.status("Innodb_buffer_pool_pages_dirty")
            total = max(1, bench.status("Innodb_buffer_pool_pages_total"))
            history = bench.status("Innodb_history_list_length")
            if dirty < total / 100 and history < 1000:
                break
            time.sleep(0.5)
    finally:
        cur.execute(f"SET GLOBAL innodb_max_dirty_pages_pct = {float(pct)}")  # type: ignore[arg-type]
        conn.close()
    return time.monotonic() - started


def claim_rates(
    bench: Bench, histories: list[int], claims: int, blocks: int = 10, settle_timeout: float = 180
) -> list[dict[str, Any]]:
    """email_claim_batch(8) on one connection per table, each table holding `history` terminal rows and
    a backlog to claim. The tables are measured in alternating blocks of claims (forwards, then
    backwards), so a drift of the machine over the run falls on every table alike. Finalizes follow
    each claim and are not timed."""
    dsns = {}
    for h in histories:
        dsn = bench.fresh_database()
        fill_terminal_rows(dsn, h)
        enqueue_bulk(dsn, claims * 8, "due")
        dsns[h] = dsn
    waited = settle(bench, settle_timeout)
    repos = {h: OutboxRepository.open(dsn) for h, dsn in dsns.items()}
    times: dict[int, list[float]] = {h: [] for h in histories}
    per_block = max(1, claims // blocks)
    for b in range(blocks):
        for h in histories if b % 2 == 0 else histories[::-1]:
            repo = repos[h]
            for _ in range(per_block):
                token = uuid.uuid4().hex
                t0 = time.perf_counter()
                rows = repo.claim_batch(token, "rate", 60, 8)
                times[h].append((time.perf_counter() - t0) * 1000)
                for r in rows:
                    repo.finalize_sent(r.id, token, "m")
    for repo in repos.values():
        repo.close()
    return [
        {
            "history_rows": h,
            "claims": len(times[h]),
            "settle_s": waited,
            "p50_ms": percentile(times[h], 50),
            "p99_ms": percentile(times[h], 99),
            # claim_batch(8) calls per second of claiming on one connection (finalizes not timed)
            "claims_per_s": len(times[h]) / (sum(times[h]) / 1000),
        }
        for h in histories
    ]
