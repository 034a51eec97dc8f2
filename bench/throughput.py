"""Throughput benchmark: the outbox beside the bare SES send loop, Celery + Redis and Celery + RabbitMQ,
in one run.

Starts a private database server with durable settings (innodb_flush_log_at_trx_commit=1) and the
local SES endpoint in a process of its own (with a configurable latency), then runs the scenarios of
bench/scenarios/ in this order and writes the report (bench/report.py):

- the outbox at R = 1, 2, 4 replicas x concurrency C, beside the bare loop (emails/s, statements,
  CALLs, worker and database CPU per email, empty claims, peak RSS; a paced enqueue-to-sent latency);
- the latency sweep, and at 0 and 50 ms the peers: the bare loop, Celery + Redis (in memory),
  Celery + RabbitMQ (durable queue, persistent delivery, publisher confirms) and the outbox, all
  2 x 8 on the same N from a backlog, in rotating rounds: emails/s, ratio to the bare loop, CPU ms per
  email of senders + store and the store's share, lost and duplicated sends counted per id by the
  endpoint;
- the claim paths (per-row against batch) at R = 1, 2, 4, 8, database only;
- enqueue on 1 and 8 connections;
- the claim rate with an empty table, 10k and 1M terminal rows.

    .venv/bin/python bench/throughput.py         # the full run: docs/performance.png and the generated
                                                 # block of docs/performance.md (the peers, the claim rate)
    .venv/bin/python bench/throughput.py --tiny  # the short run of `make test` (200 emails a run, 1
                                                 # replica, the peers at 50 ms only): it proves the
                                                 # harness runs, not figures; writes its plot and
                                                 # document copy beside its results.json
    .venv/bin/python bench/throughput.py --peers-only --rounds 5   # only the peers' table

The Celery peers need the `bench` extra (`pip install -e .[bench]`) and redis-server and
rabbitmq-server binaries (db/ensure-server-binary.sh installs Debian's); each run starts private
brokers of its own. Benchmarks print figures. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness import ROOT, Bench
from report import PEER_HEADER, peer_table, plot, print_table, versions, write_doc
from scenarios.bare import run_bare
from scenarios.claim_paths import run_claim_path
from scenarios.enqueue import run_enqueue
from scenarios.outbox import run_outbox
from scenarios.peers import BARE, OUTBOX, PEER_LATENCIES, PEER_SYSTEMS, measure_round_robin, middle, peer_row
from scenarios.table_size import claim_rates

from email_outbox_devtools.dbserver import PrivateServer


def replica_sweep(
    bench: Bench, replica_counts: list[int], c: int, emails: int, base: Path
) -> list[dict[str, Any]]:
    sweep = []
    for r in replica_counts:
        run = run_outbox(bench, 0.0, r, c, emails, base, paced_rate=100.0 if r == replica_counts[-1] else 0.0)
        bare = run_bare(0.0, r, c, emails)
        row = {**asdict(run), "bare_emails_per_s": bare.emails_per_s, "bare_cpu_ms_per_email": bare.cpu_ms_per_email,
               "ratio": run.emails_per_s / bare.emails_per_s}  # fmt: skip
        sweep.append(row)
        print(f"outbox R={r} C={c} latency 0: {run.emails_per_s:.0f}/s, bare {bare.emails_per_s:.0f}/s, ratio {row['ratio']:.2f};"
              f" bare CPU {bare.cpu_ms_per_email:.2f} ms/email;"
              f" statements/email {run.statements_per_email:.2f}, CALLs/email {run.calls_per_email:.2f},"
              f" CPU {run.cpu_ms_per_email:.2f} ms/email (+ database {run.store_cpu_ms_per_email:.2f}),"
              f" empty claims/email {run.empty_claims_per_email:.3f},"
              f" peak RSS {run.peak_rss_mb:.0f} MB" + (f", paced p50/p99 {run.p50_ms:.0f}/{run.p99_ms:.0f} ms" if run.p50_ms else ""),
              flush=True)  # fmt: skip
    return sweep


def latency_sweep(
    bench: Bench, latencies: list[float], lat_r: int, c: int, emails: int, base: Path, rounds: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The outbox and the bare loop at each latency; at PEER_LATENCIES every peer too, `rounds` times."""
    by_latency, peers = [], []
    for latency in latencies:
        peer = latency in PEER_LATENCIES
        systems = PEER_SYSTEMS if peer else (BARE, OUTBOX)
        measured = measure_round_robin(bench, systems, latency, lat_r, c, emails, base, rounds if peer else 1)
        run, bare = middle(measured[OUTBOX]), middle(measured[BARE])
        ideal = lat_r * c / latency if latency else float("nan")
        row = {**run.detail, "bare_emails_per_s": bare.emails_per_s, "ideal_emails_per_s": ideal,
               "of_ideal": run.emails_per_s / ideal if latency else float("nan")}  # fmt: skip
        by_latency.append(row)
        print(f"outbox R={lat_r} latency {latency * 1000:g} ms: {run.emails_per_s:.0f}/s, bare {bare.emails_per_s:.0f}/s,"
              f" ideal {ideal:.0f}/s", flush=True)  # fmt: skip
        if peer:
            peers += [peer_row(system, latency, measured[system]) for system in systems]
    return by_latency, peers


def claim_and_enqueue(bench: Bench, results: dict[str, Any], claim_replicas: list[int], emails: int, tiny: bool,
                      history: list[int], claims_per_table: int) -> None:  # fmt: skip
    """`tiny`: the enqueue runs half a second and the tables are measured without waiting for InnoDB
    to settle (a few seconds at most), so the short run proves each step runs."""
    claims = []
    for r in claim_replicas:
        for path in ("per_row", "batch"):
            cr = run_claim_path(bench, path, r, emails)
            claims.append(asdict(cr))
            print(f"database path {path} R={r}: {cr.emails_per_s:.0f}/s, lost races/email {cr.lost_per_email:.3f}",
                  flush=True)  # fmt: skip
    results["claim_paths"] = claims
    results["enqueue"] = []
    for k in (1, 8):
        rate = run_enqueue(bench, k, 0.5 if tiny else 8.0)
        results["enqueue"].append({"connections": k, "per_s": rate})
        print(f"enqueue on {k} connection(s), one transaction each: {rate:.0f}/s", flush=True)
    results["table_size"] = claim_rates(
        bench, history, claims_per_table, settle_timeout=2.0 if tiny else 180.0
    )
    print(f"(InnoDB settled for {results['table_size'][0]['settle_s']:.0f} s after the fixtures)", flush=True)
    for lat in results["table_size"]:
        print(f"claim_batch(8) with {lat['history_rows']} terminal rows: p50 {lat['p50_ms']:.2f} ms,"
              f" p99 {lat['p99_ms']:.2f} ms, {lat['claims_per_s']:.0f} claims/s", flush=True)  # fmt: skip
    empty_rate = results["table_size"][0]["claims_per_s"]
    largest = results["table_size"][-1]
    print(f"claim rate with {largest['history_rows']} terminal rows: {largest['claims_per_s']:.0f} claims/s,"
          f" empty table {empty_rate:.0f} claims/s, ratio {largest['claims_per_s'] / empty_rate:.2f}", flush=True)  # fmt: skip


def scale(
    bench: Bench, results: dict[str, Any], base: Path, c: int, emails: int, history: int, rounds: int
) -> int:
    """The database's CPU per email as replicas are added (each R `rounds` times, medians), and the claim
    rate with `history` terminal rows beside an empty table."""
    results["replicas"] = []
    for r in (1, 2, 4):
        runs = sorted(
            (run_outbox(bench, 0.0, r, c, emails, base) for _ in range(rounds)), key=lambda x: x.emails_per_s
        )
        mid = runs[(len(runs) - 1) // 2]
        results["replicas"].append(
            {**asdict(mid), "rounds_store_cpu_ms_per_email": [x.store_cpu_ms_per_email for x in runs]}
        )
        print(f"outbox R={r} x {c} at 0 ms: {mid.emails_per_s:.0f}/s, database CPU"
              f" {sorted(x.store_cpu_ms_per_email for x in runs)[(len(runs) - 1) // 2]:.2f} ms/email (rounds:"
              f" {', '.join(f'{x.store_cpu_ms_per_email:.2f}' for x in runs)}), workers {mid.cpu_ms_per_email:.2f} ms/email,"
              f" CALLs/email {mid.calls_per_email:.2f}", flush=True)  # fmt: skip
    results["table_size"] = claim_rates(bench, [0, history], 1000)
    for t in results["table_size"]:
        print(f"claim_batch(8) with {t['history_rows']:,} terminal rows: {t['claims_per_s']:.0f} claims/s,"
              f" p50 {t['p50_ms']:.2f} ms, p99 {t['p99_ms']:.2f} ms", flush=True)  # fmt: skip
    (base / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"results in {base / 'results.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a short run that proves the harness runs")
    parser.add_argument("--peers-only", action="store_true", help="only the peers' table at 0 and 50 ms")
    parser.add_argument(
        "--scale", action="store_true",
        help="only the scale figures: the database's CPU per email at 1, 2 and 4 replicas (0 ms), and the"
        " claim rate with an empty table and --history terminal rows",
    )  # fmt: skip
    parser.add_argument("--emails", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--history", type=int, default=1_000_000, help="terminal rows for the table-size test"
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"), help="JSON results and logs")
    parser.add_argument("--plot", default=str(ROOT / "docs" / "performance.png"))
    parser.add_argument(
        "--doc", default=str(ROOT / "docs" / "performance.md"), help="its generated block is rewritten"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of each peer at 0 and 50 ms; the table gives the median"
    )
    parser.add_argument("--buffer-pool-size", default="1G", help="the database server's InnoDB buffer pool")
    args = parser.parse_args(argv)
    tiny = args.tiny
    emails = 200 if tiny else args.emails
    c = args.concurrency
    rounds = 1 if tiny else args.rounds
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="throughput-", dir=out))
    server = PrivateServer(
        base / "db", durable=True, extra_args=[f"--innodb-buffer-pool-size={args.buffer_pool_size}"]
    )
    server.start()
    bench = Bench(server)
    results: dict[str, Any] = {"server": server.version(), "durable": "innodb_flush_log_at_trx_commit=1",
                               "cpus": os.cpu_count(), "emails_per_run": emails,
                               "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), **versions()}  # fmt: skip
    print(f"server {results['server']}, {results['durable']}, {emails} emails per run", flush=True)
    lat_r = 2
    try:
        if args.scale:
            return scale(bench, results, base, c, emails, args.history, rounds)
        if not args.peers_only:
            results["replica_sweep"] = replica_sweep(bench, [1] if tiny else [1, 2, 4], c, emails, base)
            results["replica_sweep_latency_ms"] = 0.0
        # The tiny run: every peer once, at the one latency that also gives the ideal rate; each broker
        # starts once (RabbitMQ's boot is most of a peer's run there).
        latencies = (
            [PEER_LATENCIES[-1]] if tiny else list(PEER_LATENCIES) if args.peers_only else [0.0, 0.02, 0.05]
        )
        results["latency_sweep"], results["peers"] = latency_sweep(
            bench, latencies, lat_r, c, emails, base, rounds
        )
        results["latency_sweep_replicas"], results["peer_rounds"] = lat_r, rounds
        print(f"\nthe peers, {lat_r} processes x {c}, {emails} emails each from a backlog, median of {rounds}"
              f" round(s); CPU ms/email = senders + store, and of it the store's; lost and duplicates summed"
              f" over the rounds:", flush=True)  # fmt: skip
        print_table(PEER_HEADER, peer_table(results["peers"]))
        print(flush=True)
        if not args.peers_only:
            claim_and_enqueue(bench, results, [1] if tiny else [1, 2, 4, 8], emails, tiny,
                              [0, 10_000] if tiny else [0, 10_000, args.history], 50 if tiny else 1000)  # fmt: skip
    finally:
        server.stop()
    (base / "results.json").write_text(json.dumps(results, indent=2, default=str))
    # Only a full run rewrites docs/; the tiny and --peers-only runs write their copies beside results.json.
    to_docs = not tiny and not args.peers_only
    plot(results, Path(args.plot) if to_docs else base / "performance.png")
    write_doc(results, Path(args.doc), Path(args.doc) if to_docs else base / "performance.md")
    print(f"results in {base / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
