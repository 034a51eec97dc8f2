"""Retention beside sending (issue 28): `email-outbox retention` deleting the old half of a big table
while two claim-and-send loops work through a backlog, against the same loops without it.

The table holds ROWS terminal rows, each with an audit event; the first OLD of them (by id) were last
changed 40 days ago, the rest today. A backlog of due rows is claimed by two processes, each looping
`email_claim_batch(8)` (timed: the claim latency), a simulated send of SEND_MS for the batch (SES's
round trip, the sends of a batch in parallel), then `email_finalize_sent` for each row. Phase one
runs the loops alone for --baseline-seconds; phase two runs them while the real CLI,
`email-outbox retention --older-than-days 30` (with its default --pause-ms unless given), deletes the
old rows. The loops call through the worker's DatabaseCalls, so a deadlock or lock wait timeout is
retried as a worker retries it, and counted. Printed and written to results.json: claim p50/p99 and
emails/s in each phase, the server's row lock waits and deadlocks, the senders' retries and the
retention batches run again, the rows deleted, the run's time and rows/s; a plot of claim latency
over time with the retention run marked (retention.png); InnoDB's last deadlock (last-deadlock.txt).

    .venv/bin/python bench/retention.py                       # 1,000,000 of 2,000,000 rows
    .venv/bin/python bench/retention.py --rows 200000 --old 100000
    .venv/bin/python bench/retention.py --tiny                # the form `make test` runs

Benchmarks print figures. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import queue
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import mysql.connector
from harness import ROOT, Bench, enqueue_bulk, make_due, percentile
from scenarios.table_size import fill_terminal_rows, settle

from email_outbox.cli.retention import DEFAULT_PAUSE_MS
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import TransientDatabaseError
from email_outbox.models import ClaimedEmail
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.stats import WorkerStats
from email_outbox_devtools.dbserver import PrivateServer

SEND_MS = 50.0
CLAIM_BATCH = 8
CHUNK = 50_000
LEASE_S = 60

T = TypeVar("T")


def shape_history(dsn: DatabaseDsn, rows: int, old: int) -> None:
    """A fixture, not transitions: fill_terminal_rows' Sent rows, the first `old` of them (by id) last
    changed 40 days ago and the rest today, and one audit event for each row, so retention deletes
    from two tables. Ids are taken as they came (a bulk insert may leave gaps in auto-increment)."""
    fill_terminal_rows(dsn, rows)
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT MAX(id) FROM email_delivery_attempts")
    (last,) = cur.fetchone()  # type: ignore[misc]
    cur.execute("SELECT id FROM email_delivery_attempts ORDER BY id LIMIT 1 OFFSET %s", (old - 1,))
    (boundary,) = cur.fetchone()  # type: ignore[misc]
    for start in range(0, int(last), CHUNK):
        end = start + CHUNK
        cur.execute(
            "INSERT INTO email_delivery_events (attempt_id, occurred_at, from_status, to_status, actor, detail)"
            " SELECT id, updated_at, 'Processing', 'Sent', 'history', 'sent' FROM email_delivery_attempts"
            " WHERE id > %s AND id <= %s",
            (start, end),
        )
        cur.execute(
            "UPDATE email_delivery_attempts SET"
            " created_at = IF(id <= %s, UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6)),"
            " updated_at = IF(id <= %s, UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6))"
            " WHERE id > %s AND id <= %s",
            (boundary, boundary, start, end),
        )
    conn.close()


def run_senders(bench: Bench, dsn: DatabaseDsn, seconds: float, during: list[str] | None) -> dict[str, Any]:
    """The two loops for `seconds`, or, with `during` (a command), for as long as it runs; with the
    server's row lock waits over the phase (Innodb_row_lock_waits, _time), to tell waiting on a lock
    from waiting for a CPU."""
    waits_before, wait_ms_before = bench.status("Innodb_row_lock_waits"), bench.status("Innodb_row_lock_time")
    deadlocks_before = bench.status("Innodb_deadlocks")
    ctx = mp.get_context("fork")
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    horizon = time.monotonic() + (seconds if during is None else 24 * 3600)
    stop = ctx.Value("d", horizon)
    procs = [
        ctx.Process(target=_sender_until, args=(dsn.url(), f"w{i}", stop, out, ready, go)) for i in range(2)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire(timeout=60)
    started = time.monotonic()
    go.set()
    retention: dict[str, Any] = {}
    if during is not None:
        result = subprocess.run(during, capture_output=True, text=True, cwd=ROOT, check=True)
        retention = {"output": result.stdout.strip(), "seconds": time.monotonic() - started}
        with stop.get_lock():
            stop.value = time.monotonic()
    results = []
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=5))
        except queue.Empty:
            # A sender that died (its traceback is on stderr) sends nothing: stop, not wait an hour.
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a sender exited with {dead[0]} before reporting") from None
    for p in procs:
        p.join()
    elapsed = time.monotonic() - started
    lock_waits = bench.status("Innodb_row_lock_waits") - waits_before
    lock_wait_ms = bench.status("Innodb_row_lock_time") - wait_ms_before
    deadlocks = bench.status("Innodb_deadlocks") - deadlocks_before
    samples = sorted(s for _, ss, _, _, _ in results for s in ss)
    latencies = [ms for _, ms in samples]
    sent = sum(n for _, _, n, _, _ in results)
    # Calls the senders ran again (deadlock 1213, lock wait timeout 1205), by call and by error code.
    retries: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for _, _, _, r, e in results:
        retries.update(r)
        errors.update(e)
    return {
        "seconds": elapsed,
        "claims": len(latencies),
        "claim_p50_ms": percentile(latencies, 50),
        "claim_p99_ms": percentile(latencies, 99),
        "claim_max_ms": max(latencies) if latencies else float("nan"),
        "emails_per_s": sent / elapsed,
        "emails": sent,
        "row_lock_waits": lock_waits,
        "row_lock_wait_ms": lock_wait_ms,
        "deadlocks": deadlocks,
        "claim_retries": retries["claim"],
        "finalize_retries": retries["finalize"],
        "retries_gave_up": retries["claim_gave_up"] + retries["finalize_gave_up"],
        "db_errors": dict(errors),
        "samples": samples,
        **retention,
    }


def _sender_until(dsn_url: str, name: str, stop: Any, out: Any, ready: Any, go: Any) -> None:
    """One claim-and-send loop until `stop` (monotonic; brought forward when the retention run ends):
    (seconds since start, claim ms) per claim, the emails it finalized, and the calls it ran again.

    Every call goes through the worker's own DatabaseCalls, so a deadlock (1213) or lock wait timeout
    (1205) is retried under the worker's policy, not the bench's: a claim that still fails after the
    policy's tries backs off and claims again, as the worker's claim loop does; a finalize is retried
    until it lands (a claimed row left unfinalized would only be swept after the lease, and the send
    rate would count it as lost). A claim's time includes its retries: that is what a worker waits."""
    dsn = DatabaseDsn.parse(dsn_url)
    stats = WorkerStats()
    calls = DatabaseCalls(lambda: OutboxRepository.open(dsn), dsn, stats, random.Random(name))
    # The policy logs a warning per retry; the counts below carry them, not a few thousand log lines.
    logging.getLogger("email_outbox.worker").setLevel(logging.ERROR)
    retries: Counter[str] = Counter()

    def retried(what: str, op: Callable[[OutboxRepository], T]) -> T:
        before = sum(stats.db_errors.values())
        try:
            return calls.call(what, op)
        finally:
            retries[what] += sum(stats.db_errors.values()) - before

    calls.repository()  # connected before the start, so the first claim is not charged a connect
    ready.release()
    go.wait()
    started, samples, sent = time.monotonic(), [], 0
    while time.monotonic() < stop.value:
        token = uuid.uuid4().hex
        t0 = time.perf_counter()
        try:
            claimed = retried("claim", _claim(token, name))
        except TransientDatabaseError:
            retries["claim_gave_up"] += 1
            claimed = []
        samples.append((time.monotonic() - started, (time.perf_counter() - t0) * 1000))
        if not claimed:
            time.sleep(0.05)
            continue
        time.sleep(SEND_MS / 1000)
        for row in claimed:
            while True:
                try:
                    sent += retried("finalize", _finalize_sent(row.id, token))
                    break
                except TransientDatabaseError:
                    retries["finalize_gave_up"] += 1  # the policy's tries spent: go round again
    calls.drop()
    out.put((name, samples, sent, dict(retries), dict(stats.db_errors)))


# The calls as functions of a connection, built outside the loop that runs them (so each binds its own
# token and row, not the loop's variables at call time).
def _claim(token: str, name: str) -> Callable[[OutboxRepository], list[ClaimedEmail]]:
    return lambda r: r.claim_batch(token, name, LEASE_S, CLAIM_BATCH)


def _finalize_sent(row: int, token: str) -> Callable[[OutboxRepository], int]:
    return lambda r: r.finalize_sent(row, token, "m-" + token[:8])


def last_deadlock(bench: Bench) -> str | None:
    """The LATEST DETECTED DEADLOCK section of SHOW ENGINE INNODB STATUS: the two transactions, their
    statements and the locks they held and wanted. None if the server has seen no deadlock."""
    conn = mysql.connector.connect(host="127.0.0.1", port=bench.server.port, user="root")
    cur = conn.cursor()
    cur.execute("SHOW ENGINE INNODB STATUS")
    ((_, _, text),) = cur.fetchall()
    conn.close()
    match = re.search(r"LATEST DETECTED DEADLOCK\n-+\n(.*?)\n-+\nTRANSACTIONS", str(text), re.S)
    return match.group(1) if match else None


def count(dsn: DatabaseDsn, sql: str) -> int:
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute(sql)
    (n,) = cur.fetchone()  # type: ignore[misc]
    conn.close()
    return int(n)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5))
    for phase, colour in (("without", "tab:blue"), ("with", "tab:red")):
        samples = results[phase]["samples"]
        ax.plot([t for t, _ in samples], [ms for _, ms in samples], ".", ms=2, color=colour, alpha=0.5,
                label=f"{phase} retention: p99 {results[phase]['claim_p99_ms']:.1f} ms, "
                      f"{results[phase]['emails_per_s']:.0f} emails/s")  # fmt: skip
    ax.axvspan(0, results["with"]["seconds"], color="tab:red", alpha=0.05)
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the start of the phase")
    ax.set_ylabel("email_claim_batch(8) latency, ms")
    ax.set_title(
        f"claims of two senders while retention deletes {results['deleted']:,} of {results['rows']:,} rows"
        f" ({results['deleted_per_s']:,.0f} rows/s, {results['pause_ms']} ms between batches)"
    )
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000, help="terminal rows in the table")
    parser.add_argument("--old", type=int, default=1_000_000, help="of which this many are 40 days old")
    parser.add_argument("--tiny", action="store_true", help="4,000 rows, 2,000 old: proves the harness runs")
    parser.add_argument(
        "--pause-ms",
        type=int,
        default=DEFAULT_PAUSE_MS,
        help=f"retention's --pause-ms between batches (default: the CLI's, {DEFAULT_PAUSE_MS})",
    )
    parser.add_argument(
        "--backlog", type=int, default=100_000, help="due rows for the senders to work through"
    )
    parser.add_argument("--baseline-seconds", type=float, default=60, help="the phase without retention")
    parser.add_argument("--out", type=Path, default=None, help="where results.json and retention.png go")
    args = parser.parse_args(argv)
    rows, old = (4_000, 2_000) if args.tiny else (args.rows, args.old)
    if args.tiny:
        args.baseline_seconds = 3
    base = Path(tempfile.mkdtemp(prefix="bench-retention-"))
    out = args.out or base
    out.mkdir(parents=True, exist_ok=True)
    server = PrivateServer(base / "db", durable=True, extra_args=["--innodb-buffer-pool-size=1G"])
    server.start()
    try:
        bench = Bench(server)
        dsn = bench.fresh_database()
        t0 = time.monotonic()
        shape_history(dsn, rows, old)
        # Due rows for both phases: the senders' ceiling is 2 x 8 per SEND_MS (320/s); the run says
        # how many were left (none left would mean the senders ran dry and the rate is not comparable).
        backlog = 2_000 if args.tiny else args.backlog
        enqueue_bulk(dsn, backlog, "bulk", hold=True)
        make_due(dsn)
        waited = settle(bench, timeout=600)
        print(f"filled {rows:,} rows ({old:,} old) and a backlog of {backlog:,} in {time.monotonic() - t0:.0f}s"
              f" (settled {waited:.0f}s)", flush=True)  # fmt: skip
        without = run_senders(bench, dsn, args.baseline_seconds, None)
        command = [sys.executable, "-m", "email_outbox.cli", "retention", "--dsn", dsn.url(),
                   "--older-than-days", "30", "--by", "bench", "--pause-ms", str(args.pause_ms)]  # fmt: skip
        with_retention = run_senders(bench, dsn, 0, command)
        match = re.search(
            r"deleted (\d+) emails .* in ([\d.]+)s, (\d+) batches \((\d+) run again", with_retention["output"]
        )
        assert match, with_retention["output"]
        deleted, run_seconds = int(match.group(1)), float(match.group(2))
        batches, batches_retried = int(match.group(3)), int(match.group(4))
        deadlock = last_deadlock(bench)
        due_left = count(dsn, "SELECT COUNT(*) FROM email_delivery_attempts WHERE status = 'Pending'")
        tombstones = count(dsn, "SELECT COUNT(*) FROM email_notification_tombstones")
        conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
        cur = conn.cursor()
        cur.execute("ANALYZE TABLE email_notification_tombstones")  # fresh sizes in information_schema
        cur.fetchall()
        conn.close()
        tombstone_bytes = count(
            dsn,
            "SELECT DATA_LENGTH + INDEX_LENGTH FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'email_notification_tombstones'",
        )
        results = {
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "server": server.version(),
            "rows": rows,
            "old": old,
            "deleted": deleted,
            "events_left": count(dsn, "SELECT COUNT(*) FROM email_delivery_events WHERE actor = 'history'"),
            # The run's own time, as the CLI prints it (the phase also holds the CLI's start-up).
            "retention_s": run_seconds,
            "deleted_per_s": deleted / run_seconds,
            "batches": batches,
            "batches_retried": batches_retried,
            "send_ms": SEND_MS,
            "pause_ms": args.pause_ms,
            "due_left": due_left,
            "tombstones": tombstones,
            "tombstone_bytes_each": tombstone_bytes / max(1, tombstones),
            # InnoDB's account of the last deadlock (which statements, which locks), if any.
            "last_deadlock": deadlock,
            "with": with_retention,
            "without": without,
        }
    finally:
        server.stop()
        shutil.rmtree(base / "db", ignore_errors=True)  # gigabytes at full size
        if out != base:
            shutil.rmtree(base, ignore_errors=True)  # nothing else was written there
    print(f"retention: {results['with']['output']}")
    print(
        f"tombstones: {results['tombstones']:,}, {results['tombstone_bytes_each']:.0f} bytes each (row and index)"
    )
    print(f"due rows left after both phases: {results['due_left']:,} (0 would mean the senders ran dry)")
    print(
        f"deleted {deleted:,} of {rows:,} rows in {results['retention_s']:.1f}s ({results['deleted_per_s']:,.0f} rows/s)"
    )
    header = [
        "claims",
        "claim p50 (ms)",
        "claim p99 (ms)",
        "claim max (ms)",
        "emails/s",
        "row lock waits",
        "waited (ms)",
        "deadlocks",
        "claim retries",
        "finalize retries",
    ]
    print(f"{'':<20}" + "".join(f"{h:>17}" for h in header))
    for label, phase in (("without retention", without), ("with retention", with_retention)):
        cells = [
            f"{phase['claims']}", f"{phase['claim_p50_ms']:.2f}", f"{phase['claim_p99_ms']:.2f}",
            f"{phase['claim_max_ms']:.1f}", f"{phase['emails_per_s']:.0f}", f"{phase['row_lock_waits']}",
            f"{phase['row_lock_wait_ms']}", f"{phase['deadlocks']}", f"{phase['claim_retries']}",
            f"{phase['finalize_retries']}",
        ]  # fmt: skip
        print(f"{label:<20}" + "".join(f"{c:>17}" for c in cells))
    print(f"retention batches run again after a deadlock or lock wait timeout: {batches_retried} of {batches};"
          f" senders' retries by error code: without {without['db_errors']}, with {with_retention['db_errors']};"
          f" gave up (tries spent, tried again): {without['retries_gave_up']}, {with_retention['retries_gave_up']}")  # fmt: skip
    print(f"p99 ratio with/without: {with_retention['claim_p99_ms'] / without['claim_p99_ms']:.2f};"
          f" send rate ratio: {with_retention['emails_per_s'] / without['emails_per_s']:.3f}")  # fmt: skip
    if results["last_deadlock"]:
        (out / "last-deadlock.txt").write_text(results["last_deadlock"])
        print(f"the server's last deadlock: {out / 'last-deadlock.txt'}")
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    plot(results, out / "retention.png")
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
