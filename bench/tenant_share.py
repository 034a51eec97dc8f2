"""Tenants' fair share (issue 37): a real worker against the local SES endpoint, and the claim's plan.

1. One replica limited to 50 sends/s (the account's rate; the shared schedule paces at 95% of it).
   Tenant A has 5,000 rows due at priority 9; tenant B enqueues 2 emails/s at priority 5 for 60 s.
   Prints how long each B email waited from its enqueue to SES accepting it (target: every one within
   2 s) and A's send rate over the window against what B leaves (target: at least 90%).
2. Two backlogged tenants with weights 3 and 1 for 30 s: their shares of SES's accepted sends
   (target: within 10% of 3:1).
3. The claim at 100 tenants (each with due rows) beside N terminal rows: the plan of one tenant's
   locking read (index, access, rows read, no sort) and of the read that finds the tenants with due
   rows, and the median and p99 of an 8-row email_reserve_batch, each batch released again, beside the
   same backlog in one tenant.

    python bench/tenant_share.py            # the figures of docs/performance.md (about 3 minutes)
    python bench/tenant_share.py --tiny     # the form `make test` runs (seconds)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from claim_priority import p50_p99, plan
from costs import DIGITS, fill_terminal_rows, new_database

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.ses_endpoint import SesEndpoint
from email_outbox_devtools.worker_process import spawn_worker

ACCOUNT_RATE = 50
TENANTS_AT_SCALE = 100
BACKLOG = 10_000
# One tenant's locking read as the claim makes it (procedures/source/fragments/claim_batch.sql).
TENANT_SCAN = (
    "SELECT id, status FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_tenant_queue)"
    " WHERE claim_tenant = %s AND claim_queue_rank IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9) AND claim_queue_rank <= 9"
    " AND claim_due_at <= UTC_TIMESTAMP(6) AND attempt_count < max_attempts"
    " ORDER BY claim_queue_rank, claim_due_at, id LIMIT 8"
)
# The claim's walk of the tenants in pass order (fragments/tenant_walk.sql), as an 8-row claim reads
# it: each tenant's first row on ..._tenant_queue, and its earliest due time on ..._tenant_due only
# when that row is not due.
WALK = (
    "SELECT t.id, t.pass, IF(t.paused_reason IS NULL, COALESCE((SELECT IF(q.claim_due_at <= UTC_TIMESTAMP(6),"
    " q.id * 16 + q.claim_queue_rank, NULL) FROM email_delivery_attempts q"
    " FORCE INDEX (ix_email_delivery_attempts_tenant_queue) WHERE q.claim_tenant = t.id"
    " ORDER BY q.claim_queue_rank, q.claim_due_at, q.id LIMIT 1), IF((SELECT a.claim_due_at"
    " FROM email_delivery_attempts a FORCE INDEX (ix_email_delivery_attempts_tenant_due)"
    " WHERE a.claim_tenant = t.id ORDER BY a.claim_due_at LIMIT 1) <= UTC_TIMESTAMP(6), 0, NULL)), NULL) AS pick"
    " FROM email_tenants t FORCE INDEX (ix_email_tenants_pass) WHERE t.pass >= 0"
    " ORDER BY t.pass, t.id LIMIT 9"
)


def walk_plan(cursor: Any) -> str:
    """The walk's plan in a few words: the tenants' index read and its probes'."""
    cursor.execute("EXPLAIN " + WALK)
    rows = cursor.fetchall()
    return "; ".join(
        f"{r['type']} on {r['key']}" + (", filesort" if "filesort" in (r["Extra"] or "") else "")
        for r in rows
        if r["key"]
    )


def add_tenant(repo: OutboxRepository, name: str, weight: int = 1) -> None:
    repo.tenant_add(name, {"accounts": ["*"], "weight": weight}, "bench", "bench")


def bulk_rows(repo: OutboxRepository, tenant: str, rows: int, priority: int, prefix: str) -> None:
    """`rows` due Pending rows of `tenant`, written in one statement (a fixture, like make_due)."""
    cursor = repo.connection.cursor()
    cursor.execute(
        "INSERT INTO email_delivery_attempts (notification_id, to_address, from_address, subject, text_body,"
        " status, attempt_count, max_attempts, next_attempt_at, created_at, updated_at, priority, tenant_id)"
        " SELECT CONCAT(%s, n), CONCAT(%s, n, '@example.com'), 'shop@example.com', 's', 'x', 'Pending', 0, 5,"
        "  UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), %s,"
        "  (SELECT id FROM email_tenants WHERE name = %s)"
        f" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d AS n FROM {DIGITS} a, {DIGITS} b,"
        f" {DIGITS} c, {DIGITS} e, {DIGITS} f) seq WHERE n < %s",
        (prefix, prefix, priority, tenant, rows),
    )
    cursor.close()
    repo.connection.commit()


def accepted_by_tenant(endpoint: SesEndpoint, start: float, end: float) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in endpoint.accepted():
        if start <= m.accepted_at < end:
            tenant = m.to[0].split("-", 1)[0] if m.to else "?"
            counts[tenant] = counts.get(tenant, 0) + 1
    return counts


def _accepted_of(endpoint: SesEndpoint, addresses: dict[str, float]) -> int:
    return sum(1 for m in endpoint.accepted() if m.to and m.to[0] in addresses)


def first_send(endpoint: SesEndpoint, worker: Any) -> None:
    deadline = time.monotonic() + 60
    while not endpoint.accepted():
        if time.monotonic() > deadline or not worker.running():
            raise SystemExit("the worker sent nothing within 60 s:\n" + worker.log()[-3000:])
        time.sleep(0.05)


def run_worker(dsn: DatabaseDsn, endpoint: SesEndpoint, log_dir: Path) -> Any:
    return spawn_worker(
        dsn,
        endpoint.url,
        log_dir,
        "bench",
        env={"EMAIL_OUTBOX_POLL_INTERVAL": "0.2"},
        account_send_rate=ACCOUNT_RATE,
        concurrency=8,
        lease_seconds=60,
    )


@contextmanager
def one_worker(dsn: DatabaseDsn, log_dir: Path) -> Iterator[SesEndpoint]:
    """The local SES endpoint (its own quota far above the account's rate) and one worker at
    ACCOUNT_RATE, from the worker's first send; the worker stops on leaving, and the endpoint's
    records stay readable."""
    with SesEndpoint() as endpoint:
        endpoint.set_quota(max_send_rate=1000, max_24_hour_send=10_000_000)
        worker = run_worker(dsn, endpoint, log_dir)
        try:
            first_send(endpoint, worker)
            yield endpoint
        finally:
            worker.terminate()


def latency_scenario(server: PrivateServer, log_dir: Path, seconds: float, backlog: int) -> dict[str, Any]:
    """A's backlog at priority 9 against B's trickle at priority 5."""
    dsn = new_database(server, "share_latency")
    repo = OutboxRepository.open(dsn)
    add_tenant(repo, "a")
    add_tenant(repo, "b")
    bulk_rows(repo, "a", backlog, 9, "a-")
    with one_worker(dsn, log_dir) as endpoint:
        time.sleep(2)  # the worker at its pace before B starts
        enqueued: dict[str, float] = {}
        start = time.time()
        i = 0
        while time.time() - start < seconds:
            due = start + i / 2
            time.sleep(max(0.0, due - time.time()))
            address = f"b-{i}@example.com"
            message = {"to": [address], "subject": "code", "text": "123456", "priority": 5, "tenant": "b"}
            enqueued[address] = time.time()
            repo.enqueue_message(f"b-{i}", json.dumps(message))
            i += 1
        end = time.time()
        # B's last emails go out (at most 3 s: one that takes longer shows in the wait's max).
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and _accepted_of(endpoint, enqueued) < len(enqueued):
            time.sleep(0.05)
    waits = sorted(
        m.accepted_at - enqueued[m.to[0]] for m in endpoint.accepted() if m.to and m.to[0] in enqueued
    )
    shares = accepted_by_tenant(endpoint, start, end)
    repo.close()
    window = end - start
    a_rate = shares.get("a", 0) / window
    b_rate = shares.get("b", 0) / window
    paced = ACCOUNT_RATE * 0.95
    return {
        "b_sent": len(waits),
        "b_enqueued": len(enqueued),
        "b_wait_p50": statistics.median(waits) if waits else float("nan"),
        "b_wait_max": max(waits) if waits else float("nan"),
        "a_rate": a_rate,
        "b_rate": b_rate,
        "a_of_left": a_rate / (paced - b_rate),
        "window": window,
    }


def weights_scenario(server: PrivateServer, log_dir: Path, seconds: float, backlog: int) -> dict[str, Any]:
    dsn = new_database(server, "share_weights")
    repo = OutboxRepository.open(dsn)
    add_tenant(repo, "heavy", weight=3)
    add_tenant(repo, "light", weight=1)
    bulk_rows(repo, "heavy", backlog, 5, "heavy-")
    bulk_rows(repo, "light", backlog, 9, "light-")
    with one_worker(dsn, log_dir) as endpoint:
        start = time.time()
        time.sleep(seconds)
        end = time.time()
    shares = accepted_by_tenant(endpoint, start, end)
    repo.close()
    heavy, light = shares.get("heavy", 0), shares.get("light", 0)
    return {
        "heavy": heavy,
        "light": light,
        "ratio": heavy / light if light else float("inf"),
        "window": end - start,
    }


def scale_scenario(
    server: PrivateServer, terminal: int, repeat: int, spreads: tuple[int, ...]
) -> list[dict[str, Any]]:
    """For each number in `spreads`, the backlog spread over that many tenants."""
    results = []
    for spread in spreads:
        name = f"share_scale_{terminal}_{spread}"
        dsn = new_database(server, name)
        fill_terminal_rows(server, name, terminal)
        repo = OutboxRepository.open(dsn)
        for t in range(spread):
            add_tenant(repo, f"t{t:03d}")
            bulk_rows(repo, f"t{t:03d}", BACKLOG // spread, t % 10, f"t{t}-")
        cursor = repo.connection.cursor(dictionary=True)
        cursor.execute("ANALYZE TABLE email_delivery_attempts")
        cursor.fetchall()
        cursor.execute("SELECT id FROM email_tenants WHERE name = 't000'")
        (first,) = cursor.fetchall()
        walk = walk_plan(cursor)
        cursor.close()
        results.append(
            {
                "terminal": terminal,
                "tenants": spread,
                **plan(repo, TENANT_SCAN.replace("%s", str(first["id"]))),
                "walk": walk,
                **p50_p99(repo, repeat, "email_reserve_batch"),
            }
        )
        repo.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few seconds of each: a smoke run")
    args = parser.parse_args(argv)
    latency_seconds, weight_seconds = (4.0, 3.0) if args.tiny else (60.0, 30.0)
    backlog = 1_000 if args.tiny else 5_000
    terminal, tenants, repeat = (1_000, 10, 10) if args.tiny else (1_000_000, TENANTS_AT_SCALE, 300)
    with tempfile.TemporaryDirectory(prefix="tenant-share-") as base:
        server = PrivateServer(Path(base) / "db", extra_args=["--innodb-buffer-pool-size=1G"])
        server.start()
        try:
            latency = latency_scenario(server, Path(base), latency_seconds, backlog)
            weights = weights_scenario(server, Path(base), weight_seconds, 20 * backlog)
            # The tiny run reads the plan at `tenants` only: the one-tenant row is the full run's baseline.
            spreads = (tenants,) if args.tiny else (1, tenants)
            scale = scale_scenario(server, terminal, repeat, spreads)
        finally:
            server.stop()
    print(f"one replica, account rate {ACCOUNT_RATE}/s (paced at 95%)")
    print(
        f"A {backlog:,} due at priority 9, B 2/s at priority 5 for {latency['window']:.0f} s:"
        f" B sent {latency['b_sent']}/{latency['b_enqueued']}, enqueue to SES accepted p50"
        f" {latency['b_wait_p50']:.2f} s, max {latency['b_wait_max']:.2f} s;"
        f" A {latency['a_rate']:.1f}/s = {latency['a_of_left'] * 100:.0f}% of what B left"
    )
    print(
        f"weights 3:1, both backlogged, {weights['window']:.0f} s: heavy {weights['heavy']}, light"
        f" {weights['light']}, ratio {weights['ratio']:.2f} ({(weights['ratio'] / 3 - 1) * 100:+.1f}% of 3)"
    )
    print("| terminal rows | tenants with due rows | tenant read: index | access | rows read | sort |"
          " the walk of the tenants | reserve of 8, p50 | p99 |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for r in scale:
        print(
            f"| {r['terminal']:,} | {r['tenants']} | {r['key']} | {r['type']} | {r['r_rows']:.0f} |"
            f" {'filesort' if r['sort'] else 'none'} | {r['walk']} | {r['p50']:.2f} ms | {r['p99']:.2f} ms |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
