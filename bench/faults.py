"""The outbox's promises on a 3-node Galera cluster under the faults clusters really have.

A 3-node Galera cluster, each node in a network namespace of its own (email_outbox_devtools.netns_galera);
real `email-outbox worker` processes whose DSNs list every node (each in another order); an enqueuing
service on every node, at a steady pace, recording every enqueue whose COMMIT returned; the local SES
endpoint recording every message it accepts. Faults, each in a phase of its own and all together in a
mixed phase, in one cluster:

- kill_all_nodes:  kill -9 of every node within one second, then the cluster brought back as
                   docs/operations.md says (bootstrap from the most advanced node, the others join);
- partition:       node 1 cut off its peers, healed, then node 2, healed;
- node_pause:      SIGSTOP of one node for longer than the lease, then SIGCONT;
- worker_pause:    SIGSTOP of a worker with sends in flight, past its lease, then SIGCONT;
- worker_kill_group_commit: a worker killed (SIGKILL) while its group commit of finalizes is on the wire.

With --pair, a semi-synchronous primary/replica pair instead (PAIR_FAULTS): the primary cut off its
replica, the primary paused past the lease, the worker faults, and last the failover (kill -9 of the
primary, the replica promoted); the workers' DSNs list both servers.

Then the checker over the whole history: every committed enqueue is in the table (none lost); no
notification accepted twice by the endpoint; no UnknownOutcome row accepted again; every Sent row's
send in the endpoint's record; no worker exited on its own, every worker stopped on SIGTERM. Per phase
it prints a row: emails, lost, sent twice, UnknownOutcome, longest stall in accepted sends, conflicts
retried (1213 in the workers' logs). Exits 1 when an invariant fails.

    .venv/bin/python bench/faults.py --short            # the run `make test` does (tests/cluster)
    .venv/bin/python bench/faults.py                    # the full run (`make faults`)
    .venv/bin/python bench/faults.py --pair             # the same on a semi-synchronous pair
    .venv/bin/python bench/faults.py --phases kill_all_nodes --flush-log-at-trx-commit 0   # the risky row

Needs root (network namespaces), iproute2, galera-4, mariadb-backup and socat (make system-deps).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.worker.database import TRANSIENT_RETRY_MESSAGE
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.netns_galera import PORT, NetnsGalera, NetnsSemiSyncPair, missing_parts
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from email_outbox_devtools.worker_process import WorkerProcess, spawn_worker

FAULTS = ("kill_all_nodes", "partition", "node_pause", "worker_pause", "worker_kill_group_commit")
# The pair's faults: its primary cut off its replica, the primary paused, the workers' faults, and
# last the failover (kill -9 of the primary, the replica promoted), after which it is one server.
PAIR_FAULTS = ("partition", "node_pause", "worker_pause", "worker_kill_group_commit", "failover")
DATABASE = "outbox"
APP_USER = "app"


@dataclass
class Config:
    emails: int = 2000  # per phase
    workers: int = 3
    concurrency: int = 4
    rate: float = 30.0  # enqueues per second, all nodes together
    lease: int = 20
    seed: int = 1
    flush_log_at_trx_commit: int = 1
    phases: tuple[str, ...] = (*FAULTS, "mixed")
    pair: bool = False  # a semi-synchronous primary/replica pair instead of the Galera cluster
    # The chance that a finalize of the armed worker kills it: low, so it dies in a group commit at a
    # random moment; the short run's few sends raise it.
    failpoint_odds: float = 0.05
    settle: float = 3.0  # seconds of enqueues before a phase's faults and after them
    # The nodes a partition cuts off, one after the other (each healed before the next).
    partitioned: tuple[int, ...] = (1, 2)
    drain_timeout: float = 240.0


@dataclass
class Ledger:
    committed: set[str] = field(default_factory=set)
    in_doubt: dict[str, str] = field(default_factory=dict)  # notification id -> its business txn
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Phase:
    name: str
    started: float = 0.0  # time.time(), the endpoint's clock
    fault_from: float = 0.0
    fault_to: float = 0.0
    ended: float = 0.0
    ids: list[str] = field(default_factory=list)
    conflicts: int = 0
    events: list[str] = field(default_factory=list)
    # wsrep counters summed over the nodes, their change over the phase (a restart resets them: >= 0).
    wsrep: dict[str, float] = field(default_factory=dict)


class FaultRun:
    def __init__(self, config: Config, base: Path) -> None:
        self.config = config
        self.base = base
        self.rng = random.Random(config.seed)
        topology = NetnsSemiSyncPair if config.pair else NetnsGalera
        self.cluster = topology(base / "cluster", flush_log_at_trx_commit=config.flush_log_at_trx_commit)
        # The node that takes writes: on the pair, the primary until the failover promotes node 2.
        self.writer = 0
        self.endpoint = SesEndpoint()
        self.ledger = Ledger()
        self.workers: list[WorkerProcess] = []
        self.generation = 0
        self.expected_deaths: set[str] = set()
        self.unexpected_exits: list[str] = []
        self.wedged: list[str] = []
        self.supervising = threading.Event()
        self.worker_lock = threading.Lock()
        self.phases: list[Phase] = []

    # --- set-up ---------------------------------------------------------------------------------
    def dsn(self, order: list[int], user: str = APP_USER) -> DatabaseDsn:
        ips = [self.cluster.nodes[i].ip for i in order]
        return DatabaseDsn(user, "", ips[0], PORT, DATABASE, alternates=tuple((ip, PORT) for ip in ips[1:]))

    def setup(self) -> None:
        self.cluster.start()
        node = self.cluster.nodes[0]
        conn = mysql.connector.connect(host=node.ip, port=PORT, user="root", autocommit=True)
        cur = conn.cursor()
        cur.execute(
            f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
        )
        # The application's and the workers' account, with no global privilege, as in production (the
        # procedures still run with their definer's rights: a DSN never uses a read-only host).
        subnet = self.cluster.subnet
        cur.execute(f"CREATE USER IF NOT EXISTS '{APP_USER}'@'{subnet}.%' IDENTIFIED BY ''")
        cur.execute(f"GRANT ALL PRIVILEGES ON {DATABASE}.* TO '{APP_USER}'@'{subnet}.%'")
        conn.close()
        migrate_for_local_use(self.dsn(list(range(len(self.cluster.nodes))), user="root"))
        conn = self.connect(0)
        conn.cursor().execute(
            "CREATE TABLE fault_orders (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
            " notification_id VARCHAR(191) NOT NULL UNIQUE) ENGINE=InnoDB"
        )
        conn.close()
        self.endpoint.start()
        # Sends take a moment, as SES's do: a pause or a kill then meets sends in flight.
        self.endpoint.set_faults(FaultRule("latency", seconds=0.05))
        for i in range(self.config.workers):
            self.workers.append(self.spawn(i))
        self.supervising.set()
        threading.Thread(target=self.supervise, daemon=True).start()

    def connect(self, index: int, autocommit: bool = True) -> Any:
        node = self.cluster.nodes[index]
        return mysql.connector.connect(
            host=node.ip, port=PORT, user=APP_USER, database=DATABASE, autocommit=autocommit,
            connection_timeout=3, read_timeout=5, write_timeout=5,
        )  # fmt: skip

    # --- workers --------------------------------------------------------------------------------
    def spawn(self, slot: int, failpoint: str | None = None) -> WorkerProcess:
        self.generation += 1
        n = len(self.cluster.nodes)
        order = [(slot + k) % n for k in range(n)]
        env = {
            "EMAIL_OUTBOX_FAILPOINTS": failpoint,
            "EMAIL_OUTBOX_FAILPOINTS_SEED": f"{self.config.seed}-{self.generation}",
        }
        lease = self.config.lease
        return spawn_worker(
            self.dsn(order), self.endpoint.url, self.base, f"w{slot}.{self.generation}", env=env,
            concurrency=self.config.concurrency, batch_size=self.config.concurrency, lease_seconds=lease,
            ses_connect_timeout=1, ses_read_timeout=max(1, lease // 2 - 1), poll_interval=0.2, retry_base_seconds=0.5,
            retry_max_seconds=2, shutdown_grace_seconds=lease,
        )  # fmt: skip

    def supervise(self) -> None:
        """Restart a worker that died: by a fault (expected) or on its own (an invariant broken)."""
        while self.supervising.is_set():
            with self.worker_lock:
                for slot, worker in enumerate(self.workers):
                    if not worker.running() and self.supervising.is_set():
                        if worker.name not in self.expected_deaths:
                            self.unexpected_exits.append(f"{worker.name} exited {worker.proc.returncode}")
                        self.workers[slot] = self.spawn(slot)
            time.sleep(0.2)

    # --- enqueuers ------------------------------------------------------------------------------
    def enqueuer(
        self, index: int, prefix: str, count: int, ids: list[str], faults_over: threading.Event
    ) -> None:
        """The application on node `index`: one business row and one email per transaction, at least
        `count` and on until the phase's faults are over (a stall is then a stall, not an empty queue)."""
        pace = len(self.cluster.nodes) / self.config.rate
        conn: Any = None
        started = time.monotonic()
        k = -1
        while k + 1 < count or not faults_over.is_set():
            k += 1
            nid = f"{prefix}-n{index}-{k}"
            ids.append(nid)
            wait = started + k * pace - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # the application's pace
            for _ in range(600):
                stage = "begin"
                try:
                    # On the pair every service writes on the primary, wherever it runs.
                    conn = conn or self.connect(self.writer if self.config.pair else index, autocommit=False)
                    cur = conn.cursor()
                    conn.start_transaction()
                    cur.execute("INSERT INTO fault_orders (notification_id) VALUES (%s)", (nid,))
                    cur.execute(
                        "CALL email_enqueue(%s, %s, NULL, %s, %s, NULL, NULL, NULL)",
                        (nid, f"{nid}@example.com", f"order {nid}", "thanks"),
                    )
                    cur.fetchall()
                    while cur.nextset():
                        pass
                    cur.close()
                    stage = "commit"
                    conn.commit()
                    with self.ledger.lock:
                        self.ledger.committed.add(nid)
                    break
                except Exception as exc:
                    with self.ledger.lock:
                        self.ledger.errors[f"{stage}:{getattr(exc, 'errno', type(exc).__name__)}"] += 1
                        if stage == "commit":
                            self.ledger.in_doubt[nid] = nid
                    with contextlib.suppress(Exception):
                        conn.close()
                    conn = None
                    if stage == "commit":
                        break  # its fate is read from the business row at the end, never retried blind
                    time.sleep(0.5)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    # --- faults ---------------------------------------------------------------------------------
    def inject(self, kind: str, phase: Phase) -> None:
        c = self.cluster
        lease = self.config.lease

        def note(what: str) -> None:
            phase.events.append(f"+{time.time() - phase.fault_from:.1f}s {what}")

        if kind == "kill_all_nodes":
            c.kill_all(1.0, self.rng)
            note("killed every node")
            positions = c.recover()
            note(f"recovered: bootstrapped from the most advanced of {positions}")
        elif kind == "partition":
            for index in self.config.partitioned:
                c.isolate(index)
                note(f"node{index} cut off")
                time.sleep(max(5.0, lease / 2))
                c.heal()
                c.wait_synced()
                note(f"healed node{index}")
        elif kind == "failover":
            assert isinstance(c, NetnsSemiSyncPair)
            c.failover()
            self.writer = 1
            note("primary killed -9, replica promoted")
        elif kind == "node_pause":
            index = 1 if self.config.pair else self.rng.choice([1, 2, 3])
            c.pause(index)
            note(f"node{index} SIGSTOP for {lease + 2}s")
            time.sleep(lease + 2)
            c.resume(index)
            c.wait_synced()
        elif kind == "worker_pause":
            victim = self.worker_with_sends_in_flight()
            if victim is None:
                note("no worker had sends in flight")
                return
            victim.proc.send_signal(signal.SIGSTOP)
            note(f"{victim.name} SIGSTOP for {lease + 3}s")
            time.sleep(lease + 3)
            victim.proc.send_signal(signal.SIGCONT)
        elif kind == "worker_kill_group_commit":
            with self.worker_lock:
                slot = self.rng.randrange(len(self.workers))
                old = self.workers[slot]
                self.expected_deaths.add(old.name)
                old.terminate(timeout=120)
                armed = self.spawn(slot, failpoint=f"during_finalize={self.config.failpoint_odds}")
                self.expected_deaths.add(armed.name)
                self.workers[slot] = armed
            deadline = time.monotonic() + 60
            while armed.running() and time.monotonic() < deadline:
                time.sleep(0.1)
            note(
                f"{armed.name} killed in its group commit"
                if not armed.running()
                else "the failpoint never fired"
            )
            if armed.running():
                with self.worker_lock:
                    armed.terminate(timeout=120)

    def worker_with_sends_in_flight(self) -> WorkerProcess | None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                conn = self.connect(self.writer)
                cur = conn.cursor()
                cur.execute(
                    "SELECT DISTINCT claimed_by FROM email_delivery_attempts WHERE status = 'Processing'"
                )
                names = {str(r[0]) for r in cur.fetchall()}
                conn.close()
                with self.worker_lock:
                    live = [w for w in self.workers if w.name in names and w.running()]
                if live:
                    return live[0]
            time.sleep(0.05)
        return None

    def wsrep_counters(self) -> dict[str, float]:
        """Flow control and certification, summed over the nodes that answer."""
        names = ("wsrep_flow_control_paused_ns", "wsrep_local_cert_failures", "wsrep_local_bf_aborts",
                 "wsrep_flow_control_sent")  # fmt: skip
        total: dict[str, float] = dict.fromkeys(names, 0.0)
        for node in self.cluster.nodes:
            with contextlib.suppress(Exception):
                conn = self.connect(node.index - 1)
                cur = conn.cursor()
                cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (%s, %s, %s, %s)", names)
                for name, value in cur.fetchall():
                    total[str(name)] += float(value)
                conn.close()
        return total

    def conflicts(self) -> int:
        total = 0
        for path in self.base.glob("w*.log"):
            text = path.read_text(errors="replace")
            total += sum(
                1 for line in text.splitlines() if TRANSIENT_RETRY_MESSAGE in line and "1213" in line
            )
        return total

    # --- one phase ------------------------------------------------------------------------------
    def run_phase(self, name: str) -> Phase:
        phase = Phase(name, started=time.time())
        conflicts_before = self.conflicts()
        wsrep_before = self.wsrep_counters()
        per_node = self.config.emails // len(self.cluster.nodes)
        faults_over = threading.Event()
        threads = [
            # The phase's position in the ids too: a fault may run more than once (--phases a,a).
            threading.Thread(
                target=self.enqueuer,
                args=(i, f"{name}{len(self.phases)}", per_node, phase.ids, faults_over),
                daemon=True,  # a SIGTERM of the run (its cleanup) must not wait for their retries
            )
            for i in range(len(self.cluster.nodes))
        ]
        for t in threads:
            t.start()
        kinds = [name]
        if name == "mixed" and self.config.pair:
            # Without the failover, which ends the pair: it runs last, alone.
            kinds = list(PAIR_FAULTS[:-1])
            self.rng.shuffle(kinds)
        elif name == "mixed":
            kinds = list(FAULTS)
            self.rng.shuffle(kinds)
        time.sleep(self.config.settle)
        phase.fault_from = time.time()
        for kind in kinds:
            self.inject(kind, phase)
            print(f"  {name}: {phase.events[-1] if phase.events else kind}", flush=True)
        # A few seconds more of enqueues after the faults, so the stall covers the recovery too.
        time.sleep(self.config.settle)
        phase.fault_to = time.time()
        faults_over.set()
        for t in threads:
            t.join()
        self.drain()
        phase.ended = time.time()
        phase.conflicts = self.conflicts() - conflicts_before
        after = self.wsrep_counters()
        phase.wsrep = {k: max(0.0, after[k] - wsrep_before[k]) for k in after}
        return phase

    def drain(self) -> None:
        deadline = time.monotonic() + self.config.drain_timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                conn = self.connect(self.writer)
                cur = conn.cursor()
                cur.execute(
                    "SELECT COUNT(*) FROM email_delivery_attempts"
                    " WHERE status IN ('Pending', 'Retrying', 'Processing')"
                )
                (left,) = cur.fetchone()
                conn.close()
                if left == 0:
                    return
            time.sleep(0.5)

    # --- the run --------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        self.setup()
        print(f"cluster up in {time.monotonic() - started:.0f}s; logs in {self.base}", flush=True)
        for name in self.config.phases:
            print(f"phase {name}", flush=True)
            self.phases.append(self.run_phase(name))
        self.supervising.clear()
        with self.worker_lock:
            for worker in self.workers:
                try:
                    code = worker.terminate(timeout=self.config.lease * 3)
                    if code != 0:
                        self.unexpected_exits.append(f"{worker.name} exited {code} on SIGTERM")
                except subprocess.TimeoutExpired:
                    self.wedged.append(worker.name)
                    worker.kill()
        report = self.check()
        report["seconds"] = round(time.monotonic() - started, 1)
        return report

    def resolve_in_doubt(self, cur: Any) -> None:
        for nid in list(self.ledger.in_doubt):
            cur.execute("SELECT COUNT(*) FROM fault_orders WHERE notification_id = %s", (nid,))
            if cur.fetchone()[0]:
                self.ledger.committed.add(nid)

    def check(self) -> dict[str, Any]:
        conn = self.connect(self.writer)
        cur = conn.cursor()
        if not self.config.pair:
            cur.execute("SET SESSION wsrep_sync_wait = 1")
        self.resolve_in_doubt(cur)
        cur.execute("SELECT notification_id, CAST(status AS CHAR) FROM email_delivery_attempts")
        status_of = {str(n): str(s) for n, s in cur.fetchall()}
        cur.execute("SHOW GLOBAL VARIABLES LIKE 'innodb_flush_log_at_trx_commit'")
        flush = cur.fetchone()[1]
        conn.close()
        accepted: Counter[str] = Counter()
        accepted_at: dict[str, list[float]] = {}
        for message in self.endpoint.accepted():
            nid = message.to[0].split("@")[0]
            accepted[nid] += 1
            accepted_at.setdefault(nid, []).append(message.accepted_at)
        times = sorted(t for ts in accepted_at.values() for t in ts)
        rows = []
        for phase in self.phases:
            ids = [i for i in phase.ids if i in self.ledger.committed]
            lost = [i for i in ids if i not in status_of]
            twice = [i for i in ids if accepted[i] > 1]
            unknown = [i for i in ids if status_of.get(i) == "UnknownOutcome"]
            window = [t for t in times if phase.fault_from <= t <= phase.fault_to]
            edges = list(zip([phase.fault_from, *window], [*window, phase.fault_to], strict=True))
            longest = max(edges, key=lambda e: e[1] - e[0])
            rows.append(
                {
                    "phase": phase.name,
                    "emails": len(ids),
                    "lost": len(lost),
                    "lost_ids": lost[:20],
                    "sent_twice": len(twice),
                    "sent_twice_ids": twice[:20],
                    "unknown_outcome": len(unknown),
                    "unknown_resent": sum(1 for i in unknown if accepted[i] > 1),
                    "sent_not_accepted": sum(
                        1 for i in ids if status_of.get(i) == "Sent" and not accepted[i]
                    ),
                    "still_due": sum(
                        1 for i in ids if status_of.get(i) in ("Pending", "Retrying", "Processing")
                    ),
                    "longest_stall_s": round(longest[1] - longest[0], 1),
                    "longest_stall_from_s": round(longest[0] - phase.fault_from, 1),
                    "flow_control_paused_s": round(phase.wsrep["wsrep_flow_control_paused_ns"] / 1e9, 1),
                    "cert_failures": int(phase.wsrep["wsrep_local_cert_failures"]),
                    "bf_aborts": int(phase.wsrep["wsrep_local_bf_aborts"]),
                    "conflicts_retried": phase.conflicts,
                    "events": phase.events,
                }
            )
        checks = {
            "no committed enqueue lost": all(r["lost"] == 0 for r in rows),
            "no notification accepted twice": all(n == 1 for n in accepted.values()),
            "no UnknownOutcome row sent again": all(r["unknown_resent"] == 0 for r in rows),
            "every Sent row's send was accepted": all(r["sent_not_accepted"] == 0 for r in rows),
            "nothing left due after the drain": all(r["still_due"] == 0 for r in rows),
            "no worker exited on its own": not self.unexpected_exits,
            "every worker stopped on SIGTERM": not self.wedged,
        }
        return {
            "seed": self.config.seed,
            "innodb_flush_log_at_trx_commit": flush,
            "workers": self.config.workers,
            "lease_seconds": self.config.lease,
            "phases": rows,
            "enqueue_errors": dict(self.ledger.errors),
            "commits_in_doubt": len(self.ledger.in_doubt),
            "unexpected_exits": self.unexpected_exits,
            "wedged": self.wedged,
            "checks": checks,
            "ok": all(checks.values()),
        }

    def close(self) -> None:
        self.supervising.clear()
        for worker in self.workers:
            with contextlib.suppress(Exception):
                worker.proc.send_signal(signal.SIGCONT)
                worker.kill()
        if self.endpoint.thread.is_alive():
            self.endpoint.stop()
        self.cluster.stop()


def print_report(report: dict[str, Any], command: str) -> None:
    print()
    print(f"innodb_flush_log_at_trx_commit={report['innodb_flush_log_at_trx_commit']},"
          f" {report['workers']} workers, lease {report['lease_seconds']}s, seed {report['seed']}")  # fmt: skip
    print(
        "| fault | emails | lost | sent twice | UnknownOutcome | longest stall (s) | conflicts retried |"
        " flow control paused (s) | certification failures | BF aborts |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in report["phases"]:
        print(
            f"| {r['phase']} | {r['emails']} | {r['lost']} | {r['sent_twice']} | {r['unknown_outcome']} |"
            f" {r['longest_stall_s']} | {r['conflicts_retried']} | {r['flow_control_paused_s']} |"
            f" {r['cert_failures']} | {r['bf_aborts']} |"
        )
    for r in report["phases"]:
        print(f"{r['phase']}: longest stall from +{r['longest_stall_from_s']}s; " + "; ".join(r["events"]))
    print(f"reproduce: {command}")
    print(
        f"enqueue errors: {report['enqueue_errors'] or 'none'}; commits in doubt: {report['commits_in_doubt']}"
    )
    for name, ok in report["checks"].items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print("faults OK" if report["ok"] else "faults FAILED: an invariant does not hold")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--emails", type=int, default=2000, help="per phase")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--lease", type=int, default=20)
    parser.add_argument("--rate", type=float, default=30.0, help="enqueues per second, all nodes together")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--phases", default=None, help="default: every fault of the topology, then mixed")
    parser.add_argument(
        "--pair", action="store_true", help="a semi-synchronous primary/replica pair instead of Galera"
    )
    parser.add_argument("--flush-log-at-trx-commit", type=int, choices=[0, 1, 2], default=1)
    parser.add_argument("--short", action="store_true", help="the run of `make test`: a few hundred emails")
    parser.add_argument("--out", default="bench/out")
    args = parser.parse_args(argv)
    missing = missing_parts()
    if missing:
        print(f"cannot run: {missing}", file=sys.stderr)
        return 2
    faults = PAIR_FAULTS if args.pair else FAULTS
    every = (*PAIR_FAULTS[:-1], "mixed", "failover") if args.pair else (*FAULTS, "mixed")
    phases = tuple(p for p in (args.phases or ",".join(every)).split(",") if p)
    if args.short and args.phases is None:
        phases = faults  # each fault once; the mixed phase only in the full run
    unknown = set(phases) - {*faults, "mixed"}
    if unknown:
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    config = Config(
        emails=args.emails, workers=args.workers, rate=args.rate, lease=args.lease, seed=args.seed,
        flush_log_at_trx_commit=args.flush_log_at_trx_commit, phases=phases, pair=args.pair,
    )  # fmt: skip
    if args.short:
        config.emails, config.workers, config.lease, config.rate = min(config.emails, 30), 2, 6, 6.0
        config.drain_timeout, config.failpoint_odds, config.settle = 90.0, 0.3, 1.0
        # One node cut off, then healed: two cuts back to back are the full run's.
        config.partitioned = (1,)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix=f"faults-{config.seed}-", dir=out)).resolve()
    run = FaultRun(config, base)
    # A SIGTERM (a timeout, a test's cleanup) still stops the nodes and removes the namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        report = run.run()
    finally:
        run.close()
    (base / "report.json").write_text(json.dumps(report, indent=2, default=str))
    print_report(report, "bench/faults.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
