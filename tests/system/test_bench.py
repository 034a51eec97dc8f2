"""The benchmark harness in its tiny form, so it cannot rot. It asserts that it ran and printed its
figures, never how fast anything was."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support.helpers import run_bench

SYSTEMS = ("bare boto3 loop", "Celery + Redis", "Celery + RabbitMQ", "outbox", "outbox, boto3 client")


@pytest.mark.slow
def test_tiny_throughput_run_prints_every_figure(tmp_path: Path) -> None:
    output = run_bench("throughput.py", "--tiny", "--out", str(tmp_path))
    for figure in ("ratio", "CALLs/email", "CPU", "peak RSS", "paced p50/p99", "lost races/email",
                   "enqueue on 8 connection", "terminal rows", "claims/s", "claim rate with 10000 terminal rows",
                   "ratio to bare", "CPU ms/email", "duplicates"):  # fmt: skip
        assert figure in output, f"{figure} missing from the output"
    # The peers' table: every system at 50 ms (the tiny run's one latency), each row with its ratio,
    # CPU, the store's share of it (none for the bare loop), lost and duplicates.
    for system in SYSTEMS:
        store = "-" if system == "bare boto3 loop" else r"\d+\.\d\d"
        assert re.search(rf"^{re.escape(system)}\s+50 ms\s+[\d,]+\s+\d+\.\d\d\s+\d+\.\d\d\s+{store}\s+\d+\s+\d+$",
                         output, re.MULTILINE), f"{system} missing from the table"  # fmt: skip
    (results,) = tmp_path.glob("throughput-*/results.json")
    data = json.loads(results.read_text())
    assert {r["path"] for r in data["claim_paths"]} == {"per_row", "batch"}
    assert {(r["system"], r["latency_ms"]) for r in data["peers"]} == {(s, 50.0) for s in SYSTEMS}
    # The outbox and the bare loop lose and duplicate nothing (the Celery peers are measured, not judged).
    assert all(
        (r["lost"], r["duplicates"]) == (0, 0) for r in data["peers"] if not r["system"].startswith("Celery")
    )
    # The durable peer's store is its own RabbitMQ node: its CPU was counted.
    assert all(r["store_cpu_ms_per_email"] > 0 for r in data["peers"] if r["system"] == "Celery + RabbitMQ")
    assert [t["history_rows"] for t in data["table_size"]] == [0, 10_000]
    assert all(t["claims_per_s"] > 0 for t in data["table_size"])
    assert (results.parent / "performance.png").stat().st_size > 10_000
    # The tiny run writes its copy of docs/performance.md beside its results, never over the real one.
    doc = (results.parent / "performance.md").read_text()
    for system in SYSTEMS:
        assert f"| {system} | " in doc, f"{system} missing from the document's table"
    assert "| 10,000 |" in doc


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "figures"),
    [
        (
            "outage.py",
            (
                "calls while down",
                "calls per replica per minute",
                "recovery to first send (s)",
                "recovery to empty backlog (s)",
                "emails / Sent / Failed / UnknownOutcome",
                "duplicates",
            ),
        ),
        ("costs.py", ("queue gauge (ms)", "purge all (s)", "first/last batch (ms)", "20,000")),
        (
            "feed.py",
            ("read at the head (ms)", "read from the start (ms)", "position 100 new + read (ms)", "20,000"),
        ),
        ("events.py", ("events/s", "batch 100, 1 replica", "replay, batch 100", "durable commits")),
        (
            "console.py",
            ("overview", "list Sent, a page deep", "search recipient prefix", "median (ms)", "20,000 rows"),
        ),
        (
            "memory.py",
            (
                "carried by the claim (before)",
                "batch 1, bodies loaded per send, 16 MiB budget (default)",
                "attachments loaded per send",
            ),
        ),
        (
            "retention.py",
            ("deleted 2,000 of 4,000 rows", "without retention", "with retention", "claim p99 (ms)"),
        ),
        ("enqueue_cost.py", ("email_enqueue_message of one large message", "server CPU s", "| tiny | 10 |")),
    ],
)
def test_tiny_bench_run_prints_its_figures(script: str, figures: tuple[str, ...]) -> None:
    output = run_bench(script, "--tiny")
    for figure in figures:
        assert figure in output, f"{figure} missing from the output"


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
    reason="valgrind is not installed (make system-deps installs it)",
)
def test_tiny_procedure_costs_run_counts_instructions_and_cpu() -> None:
    output = run_bench("procedure_costs.py", "--tiny")
    rows = {
        line.split(" | ")[0].strip("| "): line.strip("| ").split(" | ")[1:]
        for line in output.splitlines()
        if line.startswith("| email_")
    }
    assert set(rows) == {
        "email_finalize_and_start (Sent + start)",
        "email_finalize_batch (8 Sent + 8 starts)",
        "email_finalize_batch (3 Sent + 3 starts)",
        "email_reserve_batch (8 rows)",
        "email_reserve_batch (64 rows)",
        "email_reserve_batch (nothing due)",
        "email_send_rate_take (32 sends)",
    }
    for call, (_, instructions, _, _, _) in rows.items():
        assert float(instructions.replace(",", "")) > 0, call
    # /proc counts CPU in 10 ms ticks, so one tiny section may read 0; all of them together took some.
    assert sum(float(cpu) for _, _, _, cpu, _ in rows.values()) > 0


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed (linux-perf)")
def test_tiny_db_profile_puts_the_servers_samples_in_buckets(tmp_path: Path) -> None:
    output = run_bench("db_profile.py", "--emails", "200", "--latencies", "0", "--out", str(tmp_path))
    assert "server CPU" in output and "share of the server's CPU" in output, output
    (results,) = tmp_path.glob("db-profile-*/profile.json")
    (profile,) = json.loads(results.read_text())
    assert profile["store_cpu_ms_per_email"] > 0
    assert profile["counters_per_email"]["Com_call_procedure"] > 0
    buckets = profile["perf"]["buckets"]
    # Every sample is in one bucket, and the send path's calls showed up under their boundaries.
    assert sum(buckets.values()) == profile["perf"]["samples"] > 0
    assert {"rows updated", "commit (redo write, fsync)"} <= set(buckets), buckets
    assert not list(tmp_path.glob("db-profile-*/perf-*.data")), "the perf data is removed unless --keep"
