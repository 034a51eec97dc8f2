"""Outage benchmark: an SES outage of minutes under real worker replicas, with emails arriving throughout.

Starts a private database server and the local SES endpoint, R worker replicas (real `email-outbox
worker` processes, default settings but for the rate), a backlog, and a steady arrival of new emails.
After a first stretch of normal sending the endpoint goes down: half the outage answers every send
503 ServiceUnavailable, the other half refuses connections. Then it heals. It prints:

- the SES calls the replicas made while it was down (from each replica's email_outbox_sends_total),
  in all and per replica per minute, and the probes among them;
- the time from recovery to the first accepted send, and to an empty backlog;
- the emails Sent, Failed, UnknownOutcome, and sent twice (the endpoint counts per outbox id).

    .venv/bin/python bench/outage.py          # a 5-minute outage, 2 replicas
    .venv/bin/python bench/outage.py --tiny   # the seconds-long form `make test` runs

Benchmarks print figures. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

import mysql.connector
from prometheus_client.parser import text_string_to_metric_families

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import PrivateServer, free_port
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_endpoint import SesEndpoint
from email_outbox_devtools.worker_process import WorkerProcess, spawn_worker


@dataclass(frozen=True)
class Scenario:
    replicas: int
    backlog: int
    arrivals_per_second: float
    before_seconds: float  # normal sending before the outage
    outage_seconds: float  # half 503s, half refused connections
    max_send_rate: float  # per replica: "drains at the configured rate"
    worker_flags: dict[str, str]


FULL = Scenario(2, 2000, 5.0, 20.0, 300.0, 50.0, {})
TINY = Scenario(2, 100, 10.0, 2.0, 8.0, 100.0, {"breaker_probe_seconds": "1", "poll_interval": "0.2"})


@dataclass
class Figures:
    outage_seconds: float
    replicas: int
    calls_while_down: int
    calls_per_replica_per_minute: float
    probes_while_down: int
    recovery_to_first_send_s: float | None
    recovery_to_empty_backlog_s: float | None
    emails: int
    sent: int
    failed: int
    unknown: int
    duplicates: int


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def provider_calls(workers: list[WorkerProcess]) -> tuple[int, int]:
    """SES calls and probe sends made so far by all replicas."""
    calls = probes = 0
    for worker in workers:
        assert worker.metrics_port is not None
        samples = scrape(worker.metrics_port)
        calls += int(sum(v for (name, _), v in samples.items() if name == "email_outbox_sends_total"))
        probes += int(samples.get(("email_outbox_provider_breaker_events_total", (("event", "probes"),)), 0))
    return calls, probes


def backlog(repo: OutboxRepository) -> int:
    counts = {c.status: c.count for c in repo.queue_stats()}
    return counts.get(Status.PENDING, 0) + counts.get(Status.RETRYING, 0) + counts.get(Status.PROCESSING, 0)


class Arrivals(threading.Thread):
    def __init__(self, dsn: DatabaseDsn, per_second: float) -> None:
        super().__init__(daemon=True)
        self.dsn, self.every, self.count = dsn, 1.0 / per_second, 0
        self.stopping = threading.Event()

    def run(self) -> None:
        repo = OutboxRepository.open(self.dsn)
        try:
            while not self.stopping.wait(self.every):
                repo.enqueue(f"arrival-{self.count}", f"a{self.count}@example.com", "s", text_body="x")
                self.count += 1
        finally:
            repo.close()


def run(server: PrivateServer, scenario: Scenario, log_dir: Path) -> Figures:
    conn = mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
    conn.cursor().execute("CREATE DATABASE outage CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    conn.close()
    dsn = DatabaseDsn.parse(server.dsn("outage"))
    migrate_for_local_use(dsn)
    repo = OutboxRepository.open(dsn)
    for i in range(scenario.backlog):
        repo.enqueue(f"backlog-{i}", f"b{i}@example.com", "s", text_body="x")
    with SesEndpoint() as endpoint:
        flags = {"max_send_rate": scenario.max_send_rate, **scenario.worker_flags}
        workers = [
            spawn_worker(dsn, endpoint.url, log_dir, f"w{i}", metrics_port=free_port(), **flags)
            for i in range(scenario.replicas)
        ]
        arrivals = Arrivals(dsn, scenario.arrivals_per_second)
        try:
            for worker in workers:
                worker.wait_healthy()
            arrivals.start()
            time.sleep(scenario.before_seconds)  # the scenario's stretch of normal sending
            calls_before, probes_before = provider_calls(workers)
            down_at = time.monotonic()
            endpoint.outage("503")
            time.sleep(scenario.outage_seconds / 2)
            endpoint.outage("refused")
            time.sleep(scenario.outage_seconds / 2)
            calls_after, probes_after = provider_calls(workers)
            down_seconds = time.monotonic() - down_at
            arrivals.stopping.set()
            arrivals.join()
            recovered_at = time.time()
            recovered = time.monotonic()
            endpoint.outage(None)
            empty_after: float | None = None
            deadline = recovered + max(120.0, scenario.outage_seconds * 2)
            while time.monotonic() < deadline:
                if backlog(repo) == 0:
                    empty_after = time.monotonic() - recovered
                    break
                time.sleep(0.1)
        finally:
            arrivals.stopping.set()
            for worker in workers:
                worker.terminate()
        firsts = [m.accepted_at for m in endpoint.accepted() if m.accepted_at >= recovered_at]
        per_id = endpoint.accepted_counts()
    counts = {c.status: c.count for c in repo.outbox_stats()}
    repo.close()
    calls = calls_after - calls_before
    return Figures(
        outage_seconds=round(down_seconds, 1),
        replicas=scenario.replicas,
        calls_while_down=calls,
        calls_per_replica_per_minute=round(calls / scenario.replicas / (down_seconds / 60), 2),
        probes_while_down=probes_after - probes_before,
        recovery_to_first_send_s=round(min(firsts) - recovered_at, 2) if firsts else None,
        recovery_to_empty_backlog_s=round(empty_after, 2) if empty_after is not None else None,
        emails=scenario.backlog + arrivals.count,
        sent=counts[Status.SENT],
        failed=counts[Status.FAILED],
        unknown=counts[Status.UNKNOWN_OUTCOME],
        duplicates=sum(1 for n in per_id.values() if n > 1),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tiny", action="store_true", help="a few seconds of outage: the form make test runs"
    )
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    scenario = TINY if args.tiny else FULL
    with tempfile.TemporaryDirectory(prefix="outage-") as base:
        server = PrivateServer(Path(base) / "db")
        server.start()
        try:
            figures = run(server, scenario, Path(base))
        finally:
            server.stop()
    print(f"SES outage of {figures.outage_seconds:g} s (half 503s, half refused connections),"
          f" {figures.replicas} replicas, {scenario.arrivals_per_second:g} new emails/s throughout,"
          f" backlog {scenario.backlog}, rate {scenario.max_send_rate:g}/s per replica")  # fmt: skip
    rows = [
        ("calls while down", f"{figures.calls_while_down}"),
        ("calls per replica per minute", f"{figures.calls_per_replica_per_minute:.2f}"),
        ("probes while down", f"{figures.probes_while_down}"),
        ("recovery to first send (s)", f"{figures.recovery_to_first_send_s}"),
        ("recovery to empty backlog (s)", f"{figures.recovery_to_empty_backlog_s}"),
        ("emails / Sent / Failed / UnknownOutcome", f"{figures.emails} / {figures.sent} / {figures.failed} / {figures.unknown}"),
        ("duplicates", f"{figures.duplicates}"),
    ]  # fmt: skip
    for name, value in rows:
        print(f"{name:<42} {value}")
    if args.out:
        args.out.write_text(json.dumps(asdict(figures), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
