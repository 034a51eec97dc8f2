"""The SES account's send rate shared by every replica, measured: worker processes against the local
SES endpoint holding the account to --rate sends/s (throttling answers beyond it, as SES does), with a
backlog, while replicas are started, stopped (SIGTERM) and crashed (SIGKILL) between phases. Each phase
prints how many emails the endpoint accepted, the share of the account's rate that is, and the share of
sends it answered with a throttling error.

    .venv/bin/python bench/rate.py                      # 40/s; 1, 4, 2 replicas; 15 s a phase
    .venv/bin/python bench/rate.py --tiny               # the run the test suite makes (4 s a phase)
    .venv/bin/python bench/rate.py --rate 100 --plan 1,6,3,1 --seconds 30

A phase is measured from one second after its replicas changed (a new replica is measured once it
answers /healthz): its figures are the endpoint's own counts over the phase's window.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox_devtools.dbserver import PrivateServer, free_port
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_endpoint import SesEndpoint
from email_outbox_devtools.worker_process import WorkerProcess, spawn_worker

# After replicas change, the phase is measured from this much later: a crashed replica's slice of the
# schedule (at most a quarter of a second) is spent by then, and a new one has its first slice.
SETTLE_SECONDS = 1.0


@dataclass(frozen=True)
class Phase:
    replicas: int
    change: str
    seconds: float
    accepted: int
    throttled: int

    @property
    def per_second(self) -> float:
        return self.accepted / self.seconds

    def share_of(self, rate: float) -> float:
        return self.per_second / rate

    @property
    def throttled_share(self) -> float:
        return self.throttled / max(1, self.accepted + self.throttled)


def enqueue_backlog(dsn: DatabaseDsn, count: int) -> None:
    repo = OutboxRepository.open(dsn)
    try:
        with repo.transaction():
            for i in range(count):
                repo.enqueue(f"rate-{i}", f"user{i}@example.com", f"subject {i}", text_body="hello")
    finally:
        repo.close()


def run_phases(
    dsn: DatabaseDsn,
    endpoint: SesEndpoint,
    log_dir: Path,
    rate: float,
    plan: list[int],
    phase_seconds: float,
) -> list[Phase]:
    """Phases of `plan[i]` replicas each, `phase_seconds` long, with a backlog throughout."""
    endpoint.set_quota(max_send_rate=rate)
    enqueue_backlog(dsn, int(rate * (phase_seconds + 2 * SETTLE_SECONDS + 5) * len(plan)) + 100)
    running: list[WorkerProcess] = []
    started = 0
    phases: list[Phase] = []
    try:
        for replicas in plan:
            started, change = _change_replicas(dsn, endpoint, log_dir, running, replicas, started)
            time.sleep(SETTLE_SECONDS)
            throttled_before = endpoint.state.quota.throttled
            t0 = time.time()
            time.sleep(phase_seconds)
            t1 = time.time()
            throttled = endpoint.state.quota.throttled - throttled_before
            accepted = sum(1 for m in endpoint.accepted() if t0 <= m.accepted_at < t1)
            phases.append(Phase(replicas, change, t1 - t0, accepted, throttled))
    finally:
        for worker in running:
            worker.terminate()
    return phases


def _change_replicas(
    dsn: DatabaseDsn,
    endpoint: SesEndpoint,
    log_dir: Path,
    running: list[WorkerProcess],
    replicas: int,
    started: int,
) -> tuple[int, str]:
    """Start or stop replicas to reach `replicas`: how many were started so far, and what was done. Of
    the replicas stopped, the first is crashed (SIGKILL), the others drain (SIGTERM)."""
    if replicas > len(running):
        new = [
            spawn_worker(
                dsn,
                endpoint.url,
                log_dir,
                f"rate-{started + i}",
                env={"EMAIL_OUTBOX_POLL_INTERVAL": "0.2"},
                metrics_port=free_port(),
            )
            for i in range(replicas - len(running))
        ]
        for worker in new:
            worker.wait_healthy()
        running.extend(new)
        return started + len(new), f"started {len(new)}"
    stopping = running[replicas:]
    del running[replicas:]
    for i, worker in enumerate(stopping):
        if i == 0:
            worker.kill()
        else:
            worker.terminate()
    return started, f"crashed 1, stopped {len(stopping) - 1}" if stopping else "none"


def report(rate: float, phases: list[Phase]) -> str:
    lines = [
        f"account rate {rate:g}/s, shared by every replica through the database",
        f"{'phase':<6}{'replicas':>9}  {'change':<24}{'seconds':>8}{'accepted':>10}{'per s':>8}"
        f"{'of rate':>9}{'throttled':>11}{'throttled %':>13}",
    ]
    for i, p in enumerate(phases, 1):
        lines.append(
            f"{i:<6}{p.replicas:>9}  {p.change:<24}{p.seconds:>8.2f}{p.accepted:>10}{p.per_second:>8.2f}"
            f"{p.share_of(rate):>9.1%}{p.throttled:>11}{p.throttled_share:>13.2%}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=40.0, help="the account's maximum send rate")
    parser.add_argument("--plan", default="1,4,2", help="replicas per phase, comma-separated")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each phase")
    parser.add_argument("--tiny", action="store_true", help="4 s a phase: the test suite's run")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args(argv)
    seconds = 4.0 if args.tiny else args.seconds
    plan = [int(n) for n in args.plan.split(",")]
    base = Path(tempfile.mkdtemp(prefix="rate-", dir=args.out))
    server = PrivateServer(base / "db")
    server.start()
    try:
        import mysql.connector

        conn = mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
        conn.cursor().execute(
            "CREATE DATABASE email_outbox_rate CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
        )
        conn.close()
        dsn = DatabaseDsn.parse(server.dsn("email_outbox_rate"))
        migrate_for_local_use(dsn)
        with SesEndpoint() as endpoint:
            phases = run_phases(dsn, endpoint, base, args.rate, plan, seconds)
    finally:
        server.stop()
    print(report(args.rate, phases))
    results = base / "results.json"
    results.write_text(
        json.dumps(
            {
                "rate": args.rate,
                "phases": [
                    {
                        **asdict(p),
                        "per_second": p.per_second,
                        "share_of_rate": p.share_of(args.rate),
                        "throttled_share": p.throttled_share,
                    }
                    for p in phases
                ],
            },
            indent=2,
        )
    )
    print(f"results: {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
