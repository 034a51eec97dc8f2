"""The peers side by side: every system at one latency, `rounds` times in rotating order, and the
table's row for each (median emails/s and CPU per email, the store's share, lost and duplicates)."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import Bench, Endpoint, lost_and_duplicates

from scenarios.bare import run_bare
from scenarios.outbox import run_outbox

PEER_LATENCIES = (0.0, 0.05)
BARE = "bare boto3 loop"
OUTBOX = "outbox"
# The outbox with boto3's own send_email instead of its default lean client (email_outbox.ses.lean_client):
# the database's gains and the client's, visible apart.
OUTBOX_BOTO3 = "outbox, boto3 client"
PEER_SYSTEMS = (BARE, "Celery + Redis", "Celery + RabbitMQ", OUTBOX, OUTBOX_BOTO3)
CELERY_BROKERS = {"Celery + Redis": "redis", "Celery + RabbitMQ": "rabbitmq"}


@dataclass
class Measured:
    """One run of one system at one latency, in the table's terms."""

    emails_per_s: float
    cpu_ms_per_email: float  # senders + store
    store_cpu_ms_per_email: float | None  # the store's share (None: the bare loop has none)
    lost: int
    duplicates: int
    detail: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def line(self) -> str:
        store = "" if self.store_cpu_ms_per_email is None else f" (store {self.store_cpu_ms_per_email:.2f})"
        return (
            f"{self.emails_per_s:.0f}/s, CPU {self.cpu_ms_per_email:.2f} ms/email{store},"
            f" lost {self.lost}, duplicates {self.duplicates}{self.note}"
        )


def run_celery_peer(
    broker: str, latency: float, replicas: int, concurrency: int, emails: int, log_dir: Path
) -> Measured:
    # bench/scenarios/celery_peers.py: needs the `bench` extra (celery, redis) and the broker's binary
    from scenarios.celery_peers import celery_id, run_celery

    endpoint = Endpoint(latency)
    try:
        run = run_celery(broker, endpoint, latency, replicas, concurrency, emails, log_dir)
        lost, duplicates = lost_and_duplicates(endpoint.id_counts(), [celery_id(i) for i in range(emails)])
    finally:
        endpoint.close()
    return Measured(
        run.emails_per_s, run.cpu_ms_per_email, run.store_cpu_ms_per_email, lost, duplicates, asdict(run)
    )


def run_system(
    bench: Bench, system: str, latency: float, replicas: int, concurrency: int, emails: int, log_dir: Path
) -> Measured:
    if system == BARE:
        bare = run_bare(latency, replicas, concurrency, emails)
        return Measured(
            bare.emails_per_s, bare.cpu_ms_per_email, None, bare.lost, bare.duplicates, asdict(bare)
        )
    if system in CELERY_BROKERS:
        return run_celery_peer(CELERY_BROKERS[system], latency, replicas, concurrency, emails, log_dir)
    client = "boto3" if system == OUTBOX_BOTO3 else "lean"
    run = run_outbox(bench, latency, replicas, concurrency, emails, log_dir, ses_client=client)
    return Measured(
        run.emails_per_s, run.cpu_ms_per_email + run.store_cpu_ms_per_email, run.store_cpu_ms_per_email,
        run.lost, run.duplicates, asdict(run),
        f"; CALLs/email {run.calls_per_email:.1f}, statements/email {run.statements_per_email:.2f},"
        f" finalizes per call {run.mean_finalize_group:.1f}",
    )  # fmt: skip


def measure_round_robin(
    bench: Bench,
    systems: tuple[str, ...],
    latency: float,
    replicas: int,
    concurrency: int,
    emails: int,
    log_dir: Path,
    rounds: int,
) -> dict[str, list[Measured]]:
    """Every system `rounds` times at this latency; round k starts with system k, so neither a drift of
    the machine nor going first or last favours one system."""
    out: dict[str, list[Measured]] = {s: [] for s in systems}
    for k in range(rounds):
        for system in systems[k % len(systems) :] + systems[: k % len(systems)]:
            run = run_system(bench, system, latency, replicas, concurrency, emails, log_dir)
            out[system].append(run)
            print(
                f"  round {k + 1}/{rounds}, {system} {replicas} x {concurrency} at {latency * 1000:g} ms: {run.line()}",
                flush=True,
            )
    return out


def middle(runs: list[Measured]) -> Measured:
    """The run with the median emails/s (the lower middle for an even count)."""
    return sorted(runs, key=lambda r: r.emails_per_s)[(len(runs) - 1) // 2]


def peer_row(system: str, latency: float, runs: list[Measured]) -> dict[str, Any]:
    """The table's row: medians over the rounds of emails/s, CPU per email and the store's share;
    lost and duplicates summed."""
    stores = [r.store_cpu_ms_per_email for r in runs if r.store_cpu_ms_per_email is not None]
    return {
        "system": system,
        "latency_ms": latency * 1000,
        "emails_per_s": statistics.median(r.emails_per_s for r in runs),
        "cpu_ms_per_email": statistics.median(r.cpu_ms_per_email for r in runs),
        "store_cpu_ms_per_email": statistics.median(stores) if stores else None,
        "lost": sum(r.lost for r in runs),
        "duplicates": sum(r.duplicates for r in runs),
        "rounds_emails_per_s": [r.emails_per_s for r in runs],
        "rounds_cpu_ms_per_email": [r.cpu_ms_per_email for r in runs],
        "rounds_store_cpu_ms_per_email": [r.store_cpu_ms_per_email for r in runs],
        "rounds_detail": [r.detail for r in runs],
    }
