"""Crash-and-fault soak with a full accounting: no email lost, none sent twice, ambiguity bounded.

Starts a private database server and the local SES endpoint, R worker processes, and enqueuer
threads that write emails inside business transactions (some roll back: those must never be sent).
While they run, a seeded schedule injects faults: kill -9 of workers (at random moments, while a send
is held open after the endpoint accepted it, after a claim before the send, before and during the
finalize), kill -9 and restart of the database server, SES throttling, 5xx bursts, latency spikes
beyond the lease, read timeouts after accept, and SIGTERM rolling restarts. Then the faults stop,
the outbox drains, and every enqueued email is accounted for. Exits 1 when any invariant fails.

    .venv/bin/python bench/soak.py                      # full size: 4 workers, 20,000 emails
    .venv/bin/python bench/soak.py --short              # the run `make test` does
    .venv/bin/python bench/soak.py --seed 42 --isolation READ-COMMITTED

The seed fixes the fault schedule, the enqueue mix and the workers' failpoint coin flips. Thread and
process timing is not replayable, so a rerun with the same seed takes the same decisions at slightly
different moments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.models import Status
from email_outbox.worker.database import LOST_CONNECTION_RETRY_MESSAGE, TRANSIENT_RETRY_MESSAGE
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from email_outbox_devtools.worker_process import spawn_worker

FAULTS = (
    "worker_kill9",
    "worker_kill9_held_send",
    "worker_crash_after_claim",
    "worker_crash_before_finalize",
    "worker_crash_during_finalize",
    "db_kill9_restart",
    "ses_throttle_burst",
    "ses_5xx_burst",
    "ses_latency_beyond_lease",
    "ses_timeout_after_accept",
    "sigterm_rolling_restart",
)
FAILPOINT_OF = {
    "worker_crash_after_claim": "after_claim",
    "worker_crash_before_finalize": "before_finalize",
    "worker_crash_during_finalize": "during_finalize",
}


@dataclass
class SoakConfig:
    workers: int = 4
    emails: int = 20_000
    enqueuers: int = 4
    concurrency: int = 8
    rollback_rate: float = 0.1
    seed: int = 1
    isolation: str = "REPEATABLE-READ"
    snapshot_isolation: bool = True
    fault_interval: float = 2.0
    lease_seconds: int = 6
    drain_timeout: float = 600.0
    enqueue_rate: float = 400.0  # emails/s across all enqueuers: faults land while rows keep arriving
    short: bool = False


@dataclass
class Ledger:
    """What the enqueuers know about their own transactions."""

    committed: set[str] = field(default_factory=set)
    rolled_back: set[str] = field(default_factory=set)
    # The COMMIT's answer was lost (the server died under it): decided afterwards from the business row.
    in_doubt: dict[str, list[str]] = field(default_factory=dict)
    enqueue_errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class WorkerSlot:
    index: int
    generation: int = 0
    proc: subprocess.Popen[bytes] | None = None
    name: str = ""
    deaths: list[dict[str, Any]] = field(default_factory=list)


class Soak:
    def __init__(self, config: SoakConfig, base: Path) -> None:
        self.config = config
        self.base = base
        self.rng = random.Random(config.seed)
        args = [f"--transaction-isolation={config.isolation}"]
        self.snapshot_isolation = config.snapshot_isolation and _server_has_snapshot_isolation()
        if self.snapshot_isolation:
            args.append("--innodb-snapshot-isolation=ON")
        self.server = PrivateServer(base / "db", durable=True, extra_args=args)
        self.endpoint = SesEndpoint()
        self.ledger = Ledger()
        self.slots = [WorkerSlot(i) for i in range(config.workers)]
        self.rules: list[FaultRule] = []
        self.events: list[dict[str, Any]] = []
        self.deadlocks_before_restarts = 0
        self.db_restarts = 0
        self.supervise = threading.Event()
        # The supervisor and the fault injector both replace workers: one at a time.
        self.slot_lock = threading.Lock()
        self.supervisor_rng = random.Random(f"{config.seed}-supervisor")
        self.ambiguous_rules: list[tuple[int, FaultRule]] = []
        self.started = time.monotonic()
        self.dsn: DatabaseDsn | None = None

    # --- set-up ---------------------------------------------------------------------------------
    def setup(self) -> DatabaseDsn:
        self.server.start()
        conn = mysql.connector.connect(host="127.0.0.1", port=self.server.port, user="root", autocommit=True)
        cur = conn.cursor()
        cur.execute("DROP DATABASE IF EXISTS email_outbox_soak")
        cur.execute("CREATE DATABASE email_outbox_soak CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        conn.close()
        dsn = DatabaseDsn.parse(self.server.dsn("email_outbox_soak"))
        migrate_for_local_use(dsn)
        conn = self.connect(dsn)
        cur = conn.cursor()
        # The business table the enqueuers change in the same transaction as the email.
        cur.execute(
            "CREATE TABLE soak_orders (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
            " txn VARCHAR(64) NOT NULL, notification_id VARCHAR(191) NOT NULL UNIQUE) ENGINE=InnoDB"
        )
        conn.close()
        self.endpoint.start()
        self.dsn = dsn
        return dsn

    def connect(self, dsn: DatabaseDsn, autocommit: bool = True) -> Any:
        return mysql.connector.connect(**dsn.connect_args(), autocommit=autocommit, connection_timeout=5)

    # --- workers --------------------------------------------------------------------------------
    def spawn(self, slot: WorkerSlot, failpoint: str | None = None) -> None:
        assert self.dsn is not None
        slot.generation += 1
        slot.name = f"soak-w{slot.index}.{slot.generation}"
        env: dict[str, str | None] = {
            "EMAIL_OUTBOX_FAILPOINTS_SEED": f"{self.config.seed}-{slot.name}",
            "EMAIL_OUTBOX_FAILPOINTS": f"{failpoint}=0.2" if failpoint else None,
        }
        lease = self.config.lease_seconds
        slot.proc = spawn_worker(
            self.dsn, self.endpoint.url, self.base, slot.name, env=env,
            concurrency=self.config.concurrency,
            batch_size=self.config.concurrency,
            lease_seconds=lease,
            ses_connect_timeout=1,
            ses_read_timeout=max(1, lease // 2 - 1),
            poll_interval=0.2,
            retry_base_seconds=0.2,
            retry_max_seconds=2,
            throttle_delay_seconds=0,
            shutdown_grace_seconds=lease,
        ).proc  # fmt: skip

    def kill9(self, slot: WorkerSlot, why: str) -> None:
        if slot.proc is not None and slot.proc.poll() is None:
            slot.proc.send_signal(signal.SIGKILL)
            slot.proc.wait(timeout=30)
            self.record_death(slot, why)

    def record_death(self, slot: WorkerSlot, why: str) -> None:
        slot.deaths.append({"worker": slot.name, "why": why, "at": round(time.monotonic() - self.started, 2)})

    def supervisor(self) -> None:
        """Restart any worker that died (a failpoint fired, or a fault killed it) after a short pause."""
        while self.supervise.is_set():
            with self.slot_lock:
                for slot in self.slots:
                    if slot.proc is not None and slot.proc.poll() is not None and self.supervise.is_set():
                        code = slot.proc.returncode
                        if code != 0 and not (slot.deaths and slot.deaths[-1]["worker"] == slot.name):
                            self.record_death(slot, f"exit {code}")
                        time.sleep(self.supervisor_rng.uniform(0.1, 0.5))
                        self.spawn(slot)
            time.sleep(0.1)

    # --- enqueuers ------------------------------------------------------------------------------
    def enqueuer(self, index: int, quota: int) -> None:
        assert self.dsn is not None
        rng = random.Random(f"{self.config.seed}-enqueuer-{index}")
        conn: Any = None
        made = 0
        txn_no = 0
        pace = self.config.enqueuers / self.config.enqueue_rate
        while made < quota:
            txn_no += 1
            txn = f"s{self.config.seed}-e{index}-t{txn_no}"
            size = min(quota - made, rng.randint(1, 3))
            ids = [f"{txn}-m{k}" for k in range(size)]
            rollback = rng.random() < self.config.rollback_rate
            made += size
            stage = "begin"
            try:
                if conn is None:
                    conn = self.connect(self.dsn, autocommit=False)
                cur = conn.cursor()
                conn.start_transaction()
                for k, nid in enumerate(ids):
                    cur.execute("INSERT INTO soak_orders (txn, notification_id) VALUES (%s, %s)", (txn, nid))
                    cur.execute(
                        "CALL email_enqueue(%s, %s, NULL, %s, %s, %s, NULL, NULL)",
                        (nid, f"customer-{index}-{txn_no}-{k}@example.com", f"Order {nid}", "Thanks!",
                         "<p>Thanks!</p>"),
                    )  # fmt: skip
                    cur.fetchall()
                    while cur.nextset():
                        pass
                cur.close()
                if rollback:
                    conn.rollback()
                    with self.ledger.lock:
                        self.ledger.rolled_back.update(ids)
                else:
                    stage = "commit"
                    conn.commit()
                    with self.ledger.lock:
                        self.ledger.committed.update(ids)
            # Not only mysql.connector.Error: the C extension's commit() raises its raw
            # _mysql_connector.MySQLInterfaceError when the connection dies under the COMMIT.
            except Exception as exc:
                with self.ledger.lock:
                    self.ledger.enqueue_errors[f"{stage}:{getattr(exc, 'errno', type(exc).__name__)}"] += 1
                    if stage == "commit":
                        self.ledger.in_doubt[txn] = ids
                    else:
                        # The server rolls back a transaction whose connection or statement failed.
                        self.ledger.rolled_back.update(ids)
                with contextlib.suppress(Exception):
                    conn.close()
                conn = None
                time.sleep(0.05)
            time.sleep(pace * size * rng.uniform(0.5, 1.5))
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def resolve_in_doubt(self) -> int:
        """A COMMIT whose answer was lost either happened or not: the business row says which."""
        assert self.dsn is not None
        if not self.ledger.in_doubt:
            return 0
        conn = self.connect(self.dsn)
        cur = conn.cursor()
        committed = 0
        for txn, ids in self.ledger.in_doubt.items():
            cur.execute("SELECT COUNT(*) FROM soak_orders WHERE txn = %s", (txn,))
            (n,) = cur.fetchone()
            if n:
                self.ledger.committed.update(ids)
                committed += 1
            else:
                self.ledger.rolled_back.update(ids)
        conn.close()
        return committed

    # --- faults ---------------------------------------------------------------------------------
    def add_rule(self, rule: FaultRule) -> None:
        self.rules = [r for r in self.rules if r.remaining is None or r.remaining > 0] + [rule]
        self.endpoint.set_faults(*self.rules)

    def add_ambiguous_rule(self, rule: FaultRule) -> None:
        assert rule.remaining is not None
        self.ambiguous_rules.append((rule.remaining, rule))
        self.add_rule(rule)

    def live_slots(self) -> list[WorkerSlot]:
        return [s for s in self.slots if s.proc is not None and s.proc.poll() is None]

    def inject(self, kind: str) -> dict[str, Any]:
        event: dict[str, Any] = {"fault": kind, "at": round(time.monotonic() - self.started, 2)}
        live = self.live_slots()
        if kind == "worker_kill9" and live:
            slot = self.rng.choice(live)
            event["worker"] = slot.name
            self.kill9(slot, kind)
        elif kind == "worker_kill9_held_send":
            event.update(self.kill_holder())
        elif kind in FAILPOINT_OF and live:
            slot = self.rng.choice(live)
            event["worker"] = slot.name
            # Replace the replica with one that crashes itself at that point (SIGTERM: a clean hand-over).
            assert slot.proc is not None
            slot.proc.send_signal(signal.SIGTERM)
            slot.proc.wait(timeout=60)
            self.spawn(slot, failpoint=FAILPOINT_OF[kind])
        elif kind == "db_kill9_restart":
            self.deadlocks_before_restarts += self.server_deadlocks()
            self.server.kill()
            down = self.rng.uniform(0.5, 2.0)
            time.sleep(down)
            self.server.start()
            self.db_restarts += 1
            event["down_seconds"] = round(down, 2)
        elif kind == "ses_throttle_burst":
            n = self.rng.randint(10, 40)
            self.add_rule(FaultRule("throttle", remaining=n))
            event["requests"] = n
        elif kind == "ses_5xx_burst":
            n = self.rng.randint(5, 25)
            self.add_rule(FaultRule("error", remaining=n, status=503, code="ServiceUnavailable"))
            event["requests"] = n
        elif kind == "ses_latency_beyond_lease":
            n = self.rng.randint(1, 4)
            self.add_ambiguous_rule(FaultRule("latency", remaining=n, seconds=self.config.lease_seconds + 1))
            event["requests"] = n
        elif kind == "ses_timeout_after_accept":
            n = self.rng.randint(1, 4)
            self.add_ambiguous_rule(
                FaultRule("timeout_after_accept", remaining=n, seconds=self.config.lease_seconds)
            )
            event["requests"] = n
        elif kind == "sigterm_rolling_restart":
            codes = []
            for slot in self.live_slots():
                assert slot.proc is not None
                slot.proc.send_signal(signal.SIGTERM)
                codes.append(slot.proc.wait(timeout=60))
                self.spawn(slot)
            event["exit_codes"] = codes
        return event

    def kill_holder(self) -> dict[str, Any]:
        """Hold the next accepted send open, find the worker that made it, kill -9 it mid-send."""
        assert self.dsn is not None
        self.endpoint.state.released.clear()
        self.add_rule(FaultRule("hold_after_accept", remaining=1, seconds=30))
        deadline = time.monotonic() + 10
        held = None
        while time.monotonic() < deadline and held is None:
            with self.endpoint.state.lock:
                held = self.endpoint.state.holding[0] if self.endpoint.state.holding else None
            time.sleep(0.02)
        result: dict[str, Any] = {}
        if held is not None:
            try:
                conn = self.connect(self.dsn)
                cur = conn.cursor()
                cur.execute("SELECT claimed_by FROM email_delivery_attempts WHERE id = %s", (held.outbox_id,))
                row = cur.fetchone()
                conn.close()
            except mysql.connector.Error:
                row = None
            victim = next((s for s in self.slots if row and s.name == row[0]), None)
            if victim is not None:
                result = {"worker": victim.name, "held_outbox_id": held.outbox_id}
                self.kill9(victim, "worker_kill9_held_send")
        self.endpoint.state.released.set()
        return result or {"skipped": "no send was held in time"}

    def server_deadlocks(self) -> int:
        try:
            conn = mysql.connector.connect(host="127.0.0.1", port=self.server.port, user="root")
            cur = conn.cursor()
            cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
            row = cur.fetchone()
            conn.close()
            return int(row[1]) if row else 0
        except mysql.connector.Error:
            return 0

    def counts(self) -> dict[str, int]:
        assert self.dsn is not None
        conn = self.connect(self.dsn)
        cur = conn.cursor()
        cur.execute("SELECT CAST(status AS CHAR), COUNT(*) FROM email_delivery_attempts GROUP BY status")
        result = {s.value: 0 for s in Status}
        result.update({str(k): int(v) for k, v in cur.fetchall()})
        conn.close()
        return result

    def safe_counts(self) -> dict[str, int] | None:
        try:
            return self.counts()
        except mysql.connector.Error:
            return None

    # --- the run --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        c = self.config
        self.setup()
        for slot in self.slots:
            self.spawn(slot)
        self.supervise.set()
        supervisor = threading.Thread(target=self.supervisor, daemon=True)
        supervisor.start()
        quotas = [
            c.emails // c.enqueuers + (1 if i < c.emails % c.enqueuers else 0) for i in range(c.enqueuers)
        ]
        enqueuers = [threading.Thread(target=self.enqueuer, args=(i, q)) for i, q in enumerate(quotas)]
        for t in enqueuers:
            t.start()

        # Faults while rows arrive and until most of them are delivered. The short run cycles through
        # every kind in a seeded order so each one fires at least once.
        order = list(FAULTS)
        self.rng.shuffle(order)
        fault_no = 0
        fault_started = time.monotonic()
        while True:
            time.sleep(c.fault_interval * self.rng.uniform(0.5, 1.5))
            enqueuing = any(t.is_alive() for t in enqueuers)
            counts = self.safe_counts()
            done = counts is not None and sum(counts[s] for s in ("Sent", "Failed", "UnknownOutcome"))
            committed = len(self.ledger.committed)
            all_fired = fault_no >= len(order)
            if (
                not enqueuing
                and committed
                and done
                and done >= 0.9 * committed
                and (all_fired or not c.short)
            ):
                break
            if time.monotonic() - fault_started > c.drain_timeout:
                break
            kind = (
                order[fault_no % len(order)] if c.short or fault_no < len(order) else self.rng.choice(FAULTS)
            )
            fault_no += 1
            with self.slot_lock:
                self.events.append(self.inject(kind))
            print(f"[{time.monotonic() - self.started:7.1f}s] {self.events[-1]}", flush=True)
        fault_seconds = time.monotonic() - fault_started
        for t in enqueuers:
            t.join()

        # Quiet: no more faults; let everything drain.
        self.rules = []
        self.endpoint.set_faults()
        self.endpoint.state.released.set()
        drain_started = time.monotonic()
        while time.monotonic() - drain_started < c.drain_timeout:
            counts = self.safe_counts()
            if counts and counts["Pending"] + counts["Retrying"] + counts["Processing"] == 0:
                break
            time.sleep(0.25)
        drain_seconds = time.monotonic() - drain_started
        self.supervise.clear()
        supervisor.join()
        exit_codes = []
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.send_signal(signal.SIGTERM)
            if slot.proc is not None:
                exit_codes.append(slot.proc.wait(timeout=120))
        in_doubt_committed = self.resolve_in_doubt()
        report = self.account()
        report.update(
            {
                "fault_seconds": round(fault_seconds, 1),
                "drain_seconds": round(drain_seconds, 1),
                "total_seconds": round(time.monotonic() - self.started, 1),
                "final_exit_codes": exit_codes,
                "in_doubt_commits": len(self.ledger.in_doubt),
                "in_doubt_resolved_committed": in_doubt_committed,
                "faults": Counter(e["fault"] for e in self.events),
                "events": self.events,
            }
        )
        return report

    def account(self) -> dict[str, Any]:
        assert self.dsn is not None
        conn = self.connect(self.dsn)
        cur = conn.cursor()
        cur.execute(
            "SELECT id, notification_id, CAST(status AS CHAR), claimed_by, last_error_code, attempt_count,"
            " max_attempts FROM email_delivery_attempts"
        )
        rows = cur.fetchall()
        cur.execute("SELECT VERSION()")
        (version,) = cur.fetchone()
        # MariaDB before 11.1 names it tx_isolation; MySQL 8 and later MariaDB, transaction_isolation.
        cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN ('tx_isolation', 'transaction_isolation')")
        isolation = cur.fetchall()[0][1]
        conn.close()
        deadlocks = self.deadlocks_before_restarts + self.server_deadlocks()

        by_status = Counter(str(r[2]) for r in rows)
        present = {str(r[1]) for r in rows}
        outbox_id_of = {str(r[0]): str(r[1]) for r in rows}
        accepted = self.endpoint.accepted_counts()
        committed, rolled_back = self.ledger.committed, self.ledger.rolled_back
        sent_ids = {str(r[0]) for r in rows if r[2] == "Sent"}
        unknown = [r for r in rows if r[2] == "UnknownOutcome"]
        unknown_ids = {str(r[0]) for r in unknown}
        unknown_accepted = len(unknown_ids & set(accepted))
        lost = committed - present
        phantom = present - committed
        sent_rolled_back = {k for k in accepted if outbox_id_of.get(k) in rolled_back}
        # Unknown rows from a crash belong to the dead generation that claimed them: at most its
        # concurrency each. Provider ambiguity is bounded by the ambiguous answers injected.
        deaths = [d for s in self.slots for d in s.deaths]
        dead_names = {d["worker"] for d in deaths}
        lease_unknown_by_worker = Counter(str(r[3]) for r in unknown if r[4] == "LeaseExpired")
        ambiguous_unknown = sum(1 for r in unknown if r[4] == "AmbiguousOutcome")
        ambiguous_injected = self.ambiguous_answers_injected()
        # A dead generation can leave its in-flight rows (<= C); a database restart can cost any live
        # generation one lost claim reply or finalize per restart (<= C each).
        cc = self.config.concurrency
        generations = {f"soak-w{s.index}.{g}" for s in self.slots for g in range(1, s.generation + 1)}
        bound_of = {g: cc * ((1 if g in dead_names else 0) + self.db_restarts) for g in generations}
        crash_bound = sum(bound_of.values())
        over_bound_workers = {w: n for w, n in lease_unknown_by_worker.items() if n > bound_of.get(w, 0)}
        logs = "".join(p.read_text(errors="replace") for p in self.base.glob("soak-w*.log"))
        checks = {
            "no committed email lost": not lost,
            "no rolled-back email enqueued": not phantom,
            "no rolled-back email sent": not sent_rolled_back,
            "nothing left claimable or claimed": by_status["Pending"]
            + by_status["Retrying"]
            + by_status["Processing"]
            == 0,
            "no email accepted more than once": all(n == 1 for n in accepted.values()),
            "every Sent row was accepted": sent_ids <= set(accepted),
            "every accepted email is Sent or UnknownOutcome": set(accepted) <= sent_ids | unknown_ids,
            "lease-expired UnknownOutcome per worker within its crash bound": not over_bound_workers,
            "lease-expired UnknownOutcome within the crash bound": sum(lease_unknown_by_worker.values())
            <= crash_bound,
            "ambiguous UnknownOutcome within injected ambiguous answers": ambiguous_unknown
            <= ambiguous_injected,
            "attempts never exceed max_attempts": all(int(r[5]) <= int(r[6]) for r in rows),
        }
        return {
            "seed": self.config.seed,
            "server": version,
            "isolation": isolation,
            "innodb_snapshot_isolation": self.snapshot_isolation,
            "innodb_flush_log_at_trx_commit": 1,
            "config": asdict(self.config),
            "enqueued_committed": len(committed),
            "rolled_back": len(rolled_back),
            "rows": len(rows),
            "by_status": {s.value: by_status[s.value] for s in Status},
            "still_claimable": by_status["Pending"] + by_status["Retrying"] + by_status["Processing"],
            "lost": len(lost),
            "phantom_rows": len(phantom),
            "endpoint_accepted": sum(accepted.values()),
            "accepted_more_than_once": sum(1 for n in accepted.values() if n > 1),
            "sent_although_rolled_back": len(sent_rolled_back),
            "unknown_accepted": unknown_accepted,
            "unknown_never_accepted": len(unknown_ids) - unknown_accepted,
            "unknown_lease_expired": sum(lease_unknown_by_worker.values()),
            "unknown_ambiguous": ambiguous_unknown,
            "max_lease_expired_one_worker": max(lease_unknown_by_worker.values(), default=0),
            "worker_deaths": len(deaths),
            "db_restarts": self.db_restarts,
            "crash_bound": crash_bound,
            "ambiguous_injected": ambiguous_injected,
            "deadlocks_server": deadlocks,
            "worker_transient_retries": logs.count(TRANSIENT_RETRY_MESSAGE),
            "worker_db_unavailable_retries": logs.count(LOST_CONNECTION_RETRY_MESSAGE),
            "stale_claimant_refusals": logs.count("finalize refused:"),
            "finalize_never_landed": logs.count("finalize never landed"),
            "enqueue_errors": dict(self.ledger.enqueue_errors),
            "checks": checks,
            "ok": all(checks.values()),
        }

    def ambiguous_answers_injected(self) -> int:
        """Answers the endpoint gave (or withheld) that leave a send's outcome unknowable to the worker."""
        with self.endpoint.state.lock:
            consumed = sum(start - (rule.remaining or 0) for start, rule in self.ambiguous_rules)
        # A send held open while its worker was killed is ambiguous too, but it expires as a lease.
        return consumed

    def close(self) -> None:
        self.supervise.clear()
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                slot.proc.kill()
        if self.endpoint.thread.is_alive():
            self.endpoint.stop()
        self.server.stop()


def _server_has_snapshot_isolation() -> bool:
    from email_outbox_devtools.dbserver import find_server_binary

    binary = find_server_binary()
    if not binary:
        return False
    out = subprocess.run([binary, "--verbose", "--help"], capture_output=True, text=True, check=False).stdout
    return "innodb-snapshot-isolation" in out


def print_report(report: dict[str, Any]) -> None:
    rows = [
        ("seed", report["seed"]),
        ("server", report["server"]),
        ("isolation", report["isolation"]),
        ("innodb_snapshot_isolation", report["innodb_snapshot_isolation"]),
        (
            "fault phase / drain / total (s)",
            f"{report['fault_seconds']} / {report['drain_seconds']} / {report['total_seconds']}",
        ),
        ("faults injected", ", ".join(f"{k}={v}" for k, v in sorted(report["faults"].items()))),
        ("enqueued (committed)", report["enqueued_committed"]),
        ("rolled back", report["rolled_back"]),
        (
            "commits in doubt (resolved committed)",
            f"{report['in_doubt_commits']} ({report['in_doubt_resolved_committed']})",
        ),
        ("Sent", report["by_status"]["Sent"]),
        ("Failed", report["by_status"]["Failed"]),
        ("UnknownOutcome", report["by_status"]["UnknownOutcome"]),
        ("  accepted by the endpoint", report["unknown_accepted"]),
        ("  never accepted", report["unknown_never_accepted"]),
        (
            "  lease expired / ambiguous answer",
            f"{report['unknown_lease_expired']} / {report['unknown_ambiguous']}",
        ),
        (
            "  bound: sum over workers of C x (died + db restarts)",
            f"{report['crash_bound']} ({report['worker_deaths']} worker deaths, {report['db_restarts']} db restarts)",
        ),
        (
            "  most left by one worker generation (bound: C)",
            f"{report['max_lease_expired_one_worker']} ({report['config']['concurrency']})",
        ),
        ("  bound: ambiguous answers injected", report["ambiguous_injected"]),
        ("still claimable after drain", report["still_claimable"]),
        ("lost", report["lost"]),
        (
            "rolled back but enqueued / sent",
            f"{report['phantom_rows']} / {report['sent_although_rolled_back']}",
        ),
        ("endpoint accepted", report["endpoint_accepted"]),
        ("accepted more than once", report["accepted_more_than_once"]),
        ("deadlocks (server)", report["deadlocks_server"]),
        (
            "worker retries: transient / db unavailable",
            f"{report['worker_transient_retries']} / {report['worker_db_unavailable_retries']}",
        ),
        ("stale-claimant refusals", report["stale_claimant_refusals"]),
        ("enqueue errors", report["enqueue_errors"] or "none"),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    print(f"| {'measure':<{width}} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for key, value in rows:
        print(f"| {key:<{width}} | {value} |")
    print()
    for name, ok in report["checks"].items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print("soak OK" if report["ok"] else "soak FAILED: an invariant does not hold")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--emails", type=int, default=20_000)
    parser.add_argument("--enqueuers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seed", type=int, default=None, help="default: a random one, printed")
    parser.add_argument(
        "--isolation", choices=["REPEATABLE-READ", "READ-COMMITTED"], default="REPEATABLE-READ"
    )
    parser.add_argument(
        "--no-snapshot-isolation", action="store_true", help="leave innodb_snapshot_isolation off"
    )
    parser.add_argument("--fault-interval", type=float, default=2.0)
    parser.add_argument("--enqueue-rate", type=float, default=400.0)
    parser.add_argument("--short", action="store_true", help="the small run of `make test`: every fault once")
    parser.add_argument("--out", default="bench/out", help="where the JSON report and logs go")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1, 1_000_000)
    config = SoakConfig(
        workers=args.workers,
        emails=args.emails,
        enqueuers=args.enqueuers,
        concurrency=args.concurrency,
        seed=seed,
        isolation=args.isolation,
        snapshot_isolation=not args.no_snapshot_isolation,
        fault_interval=args.fault_interval,
        enqueue_rate=args.enqueue_rate,
        short=args.short,
    )
    if args.short:
        config.workers, config.emails, config.concurrency = min(config.workers, 3), min(config.emails, 800), 4
        config.fault_interval, config.drain_timeout = min(config.fault_interval, 1.0), 180.0
        config.enqueue_rate = min(config.enqueue_rate, 60.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix=f"soak-{seed}-", dir=out))
    print(f"soak seed {seed}: {config.workers} workers x {config.concurrency}, {config.emails} emails,"
          f" {config.isolation}; logs in {base}", flush=True)  # fmt: skip
    soak = Soak(config, base)
    try:
        report = soak.run()
    finally:
        soak.close()
    (base / "report.json").write_text(json.dumps(report, indent=2, default=str))
    print_report(report)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
