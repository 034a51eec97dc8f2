"""The report of bench/throughput.py: the printed tables, the generated block of docs/performance.md
and docs/performance.png. It reads the results dictionary the run wrote and measures nothing."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any

from scenarios.peers import BARE, PEER_SYSTEMS

X = "\N{MULTIPLICATION SIGN}"
DOC_BEGIN = "<!-- bench/throughput.py: peers begin -->"
DOC_END = "<!-- bench/throughput.py: peers end -->"
PEER_HEADER = ["system", "latency", "emails/s", "ratio to bare", "CPU ms/email", "of it, the store", "lost",
               "duplicates"]  # fmt: skip
CLAIM_HEADER = ["terminal rows already in the table", "claims/s", "of the empty table's rate", "p50", "p99"]


def systems_in(rows: list[dict[str, Any]]) -> list[str]:
    """The systems of a run in the table's order (the known ones first, then any other, as they came)."""
    seen = list(dict.fromkeys(r["system"] for r in rows))
    return [s for s in PEER_SYSTEMS if s in seen] + [s for s in seen if s not in PEER_SYSTEMS]


def _store(r: dict[str, Any]) -> str:
    return "-" if r.get("store_cpu_ms_per_email") is None else f"{r['store_cpu_ms_per_email']:.2f}"


def peer_table(rows: list[dict[str, Any]]) -> list[list[str]]:
    """One row per system and latency: emails/s, ratio to the bare loop, CPU ms per email (senders +
    store), the store's share, lost and duplicates."""
    out = []
    for latency_ms in sorted({r["latency_ms"] for r in rows}):
        at = {r["system"]: r for r in rows if r["latency_ms"] == latency_ms}
        bare = at[BARE]["emails_per_s"]
        for system in systems_in(rows):
            if system not in at:
                continue
            r = at[system]
            out.append([system, f"{latency_ms:g} ms", f"{r['emails_per_s']:,.0f}", f"{r['emails_per_s'] / bare:.2f}",
                        f"{r['cpu_ms_per_email']:.2f}", _store(r), str(r["lost"]), str(r["duplicates"])])  # fmt: skip
    return out


def side_by_side(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The document's table: one row per system, each latency's emails/s, ratio, CPU and store share
    side by side, lost and duplicates summed over the latencies."""
    latencies = sorted({r["latency_ms"] for r in rows})
    header = ["system"]
    for lat in latencies:
        header += [f"{lat:g} ms emails/s", "ratio to bare", "CPU ms/email", "of it, the store"]
    header += ["lost", "duplicates"]
    out = []
    for system in systems_in(rows):
        line, lost, dup = [system], 0, 0
        for lat in latencies:
            at = {r["system"]: r for r in rows if r["latency_ms"] == lat}
            if system not in at:
                line += ["", "", "", ""]
                continue
            r = at[system]
            line += [f"{r['emails_per_s']:,.0f}", f"{r['emails_per_s'] / at[BARE]['emails_per_s']:.2f}",
                     f"{r['cpu_ms_per_email']:.2f}", _store(r)]  # fmt: skip
            lost, dup = lost + r["lost"], dup + r["duplicates"]
        out.append([*line, str(lost), str(dup)])
    return header, out


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(x) for x in col) for col in zip(header, *rows, strict=False)]
    for line in [header, *rows]:
        print("  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip(), flush=True)


def markdown_table(header: list[str], rows: list[list[str]], right_from: int = 1) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return "\n".join("| " + " | ".join(line) + " |" for line in [header, align, *rows])


def claim_rate_rows(table_size: list[dict[str, Any]]) -> list[list[str]]:
    empty = next(t for t in table_size if t["history_rows"] == 0)
    return [[f"{t['history_rows']:,}", f"{t['claims_per_s']:,.0f}", f"{t['claims_per_s'] / empty['claims_per_s']:.2f}",
             f"{t['p50_ms']:.2f} ms", f"{t['p99_ms']:.2f} ms"] for t in table_size]  # fmt: skip


def rounds_rows(peers: list[dict[str, Any]]) -> list[list[str]]:
    def stores(r: dict[str, Any]) -> str:
        return ", ".join("-" if v is None else f"{v:.2f}" for v in r["rounds_store_cpu_ms_per_email"])

    return [[r["system"], f"{r['latency_ms']:g} ms", ", ".join(f"{v:,.0f}" for v in r["rounds_emails_per_s"]),
             ", ".join(f"{v:.2f}" for v in r["rounds_cpu_ms_per_email"]), stores(r)] for r in peers]  # fmt: skip


def doc_section(results: dict[str, Any]) -> str:
    peers = results["peers"]
    n = results["emails_per_run"]
    rounds = results["peer_rounds"]
    r = results["latency_sweep_replicas"]
    sizes = results.get("table_size")
    header, table = side_by_side(peers)
    return f"""{DOC_BEGIN}
<!-- Written by bench/throughput.py from its last run ({results["date"]}; a full run, or --peers-only with --scale's claim rate); edit the script, not this block. -->
Measured {results["date"]}: {results["cpus"]} cores, {results["server"]} (durable), {n:,} emails per run
from a backlog, {r} processes {X} 8 concurrent sends for every system, a fresh local SES endpoint per
run. Each system ran {rounds} times at each latency, in rotating order (round k starts with the k-th
system), so neither a drift of the machine nor going first favours one; emails/s, CPU and the store's
share are the medians. Every system's clock starts at its release (below) and stops at the time the
endpoint stamped on the last send it accepted, on the same clock: a send counts once SES has answered
it, and no polling interval of the harness's is in any elapsed time (the CPU is read once the harness
has seen the end). CPU per email is the senders' CPU from the moment the clock starts, plus the
store's: the database server for the outbox, the broker's processes for Celery, none for the bare
loop. Lost and duplicates come from the endpoint's records, by the unique id each send carries in an
EmailTag, summed over the rounds and latencies: lost are ids it never accepted, duplicates ids it
accepted more than once.

{markdown_table(header, table)}

- **Bare boto3 loop**: `send_email` from {r} processes {X} 8 threads, no store: the ceiling. Its
  clock starts when the ready processes are released together.
- **Celery + RabbitMQ** (durable; `bench/celery_peer.py`, `bench/brokers.py`): Celery
  {results.get("celery_version", "?")} on a private {results.get("rabbitmq_version", "RabbitMQ")} node the bench
  starts itself (its own node name, ports, epmd and Mnesia directory), a durable queue, persistent
  delivery, publisher confirms (`confirm_publish`), `task_acks_late=True`,
  `worker_prefetch_multiplier=1`, no result backend, {r} `celery worker` processes with
  `--pool threads --concurrency 8`. The backlog waits in the durable queue while the workers start on
  an empty one; once each answers a ping, a broadcast `add_consumer` sets them on it and the clock
  starts.
- **Celery + Redis** (in memory; a reference): the same app and settings on a private `redis-server`
  ({results.get("redis_version", "?")}, `--save "" --appendonly no`: nothing on disk). The backlog waits on
  a list of its own and a Redis `RENAME` makes it the workers' queue at once.
- **Outbox**: {r} worker replicas {X} concurrency 8 on the durable database, sending with its default
  lean SES client (botocore's signer, serializer and parser on boto3's connection pool:
  `email_outbox.ses.lean_client`); the clock starts once the held rows have been made due (that
  `UPDATE`'s CPU is not counted, as Celery's enqueue is not), and the harness then waits until every
  row is final before it reads the CPU. **Outbox, boto3 client**: the same with `--ses-client boto3`
  (boto3's own `send_email`), so the database's share of the gains and the client's show apart.

Every round (emails/s; CPU ms per email; of it, the store):

{markdown_table(["system", "latency", "emails/s per round", "CPU ms/email per round", "the store per round"], rounds_rows(peers), right_from=2)}

{claim_rate_section(sizes)}
{DOC_END}"""


def claim_rate_section(sizes: list[dict[str, Any]] | None) -> str:
    if not sizes:
        return "(The claim rate with history comes from a full run or `--scale`.)"
    return f"""The claim rate with history: `email_claim_batch(limit 8)` on one connection, {sizes[0]["claims"]:,}
claims per table (finalizes follow each claim and are not timed), with the table empty and with
terminal (`Sent`) rows already in it. The tables are filled, then InnoDB is left to flush and purge
what the fill wrote ({sizes[0]["settle_s"]:.0f} s), and then they are measured in alternating blocks of
claims, so a drift of the machine falls on each alike.

{markdown_table(CLAIM_HEADER, claim_rate_rows(sizes))}"""


def write_doc(results: dict[str, Any], source: Path, target: Path) -> None:
    """Replace the generated block of docs/performance.md (appended once if the document has none)."""
    text = source.read_text() if source.exists() else "# Performance\n"
    section = doc_section(results)
    if DOC_BEGIN in text and DOC_END in text:
        head, rest = text.split(DOC_BEGIN, 1)
        text = head + section + rest.split(DOC_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Beside Celery and the bare loop\n\n" + section + "\n"
    target.write_text(text)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    full = "replica_sweep" in results  # a --peers-only run has the peers' panels alone
    if full:
        (left, middle), (right, cpu) = plt.subplots(2, 2, figsize=(14, 9))[1]
    else:
        right, cpu = plt.subplots(1, 2, figsize=(14, 4.6))[1]
    if full:
        by_r = results["replica_sweep"]
        left.plot([r["replicas"] for r in by_r], [r["emails_per_s"] for r in by_r], "o-", label="outbox")
        left.plot(
            [r["replicas"] for r in by_r],
            [r["bare_emails_per_s"] for r in by_r],
            "s--",
            label="bare boto3 loop",
        )
        left.set_xlabel("replicas (concurrency 8 each)")
        left.set_ylabel("emails/s")
        left.set_title(f"emails/s vs replicas, endpoint latency {results['replica_sweep_latency_ms']:g} ms")
        left.grid(alpha=0.3)
        left.legend()
        by_l = results["latency_sweep"]
        lats = [r["latency_ms"] for r in by_l]
        middle.plot(lats, [r["emails_per_s"] for r in by_l], "o-", label="outbox")
        middle.plot(lats, [r["bare_emails_per_s"] for r in by_l], "s--", label="bare boto3 loop")
        middle.plot(lats, [r["ideal_emails_per_s"] for r in by_l], ":", label="R x C / latency")
        middle.set_xlabel("endpoint latency (ms)")
        middle.set_ylabel("emails/s")
        middle.set_title(f"emails/s vs endpoint latency, {results['latency_sweep_replicas']} replicas x 8")
        middle.set_yscale("log")
        middle.grid(alpha=0.3)
        middle.legend()
    peers = results["peers"]
    systems = systems_in(peers)
    latencies = sorted({r["latency_ms"] for r in peers})
    width = 0.8 / len(systems)
    for k, system in enumerate(systems):
        at = {r["latency_ms"]: r for r in peers if r["system"] == system}
        xs = [i + (k - (len(systems) - 1) / 2) * width for i in range(len(latencies))]
        bars = right.bar(
            xs, [at[lat]["emails_per_s"] if lat in at else 0.0 for lat in latencies], width, label=system
        )
        right.bar_label(bars, fmt="%.0f", fontsize=7)
        total = [at[lat]["cpu_ms_per_email"] if lat in at else 0.0 for lat in latencies]
        store = [(at[lat].get("store_cpu_ms_per_email") or 0.0) if lat in at else 0.0 for lat in latencies]
        senders = [t - s for t, s in zip(total, store, strict=True)]
        colour = bars.patches[0].get_facecolor()
        cpu.bar(xs, senders, width, color=colour, label=system)
        stacked = cpu.bar(
            xs, store, width, bottom=senders, color=colour, hatch="///", edgecolor="black", alpha=0.6
        )
        cpu.bar_label(stacked, labels=[f"{t:.2f}" for t in total], fontsize=7)
    for ax in (right, cpu):
        ax.set_xticks(range(len(latencies)), [f"{lat:g} ms" for lat in latencies])
        ax.set_xlabel("endpoint latency")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    right.set_ylabel("emails/s")
    right.set_title(f"the peers, {results['latency_sweep_replicas']} processes x 8, same run")
    cpu.set_ylabel("CPU ms per email")
    cpu.set_title("CPU per email: senders, and hatched on top, the store")
    plt.tight_layout()
    plt.savefig(path, dpi=100)


def versions() -> dict[str, str]:
    out = {}
    with contextlib.suppress(Exception):
        import celery

        out["celery_version"] = str(celery.__version__)
    with contextlib.suppress(Exception):
        text = subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True, check=False
        ).stdout
        out["redis_version"] = "redis-server " + text.split("v=", 1)[1].split()[0]
    with contextlib.suppress(Exception):
        text = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"],
                              capture_output=True, text=True, check=False).stdout  # fmt: skip
        out["rabbitmq_version"] = "RabbitMQ " + text.split("-", 1)[0] if text else "RabbitMQ"
    return out
