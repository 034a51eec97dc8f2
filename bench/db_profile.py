"""Where the database server's CPU per email goes: the outbox scenario of the peers' table, profiled.

Runs the outbox as `bench/throughput.py --peers-only` does (a private durable server, 2 worker
replicas x 8 sends from a held backlog, the local SES endpoint) at each latency, and over exactly the
interval whose server CPU the table charges (rows due to drained) it records:

- `perf record` on the server (cpu-clock samples with DWARF call chains; enabled through perf's
  control FIFO once the rows are due, so the idle polling before is not in it);
- the server's CPU from /proc, user and system, and per thread by its performance_schema name;
- the server's counters per email (statements, rows written and read, redo bytes, fsyncs, pages
  flushed).

Each sample is then put in one bucket by the frames on its call chain. Debian's mariadbd is stripped
to its exported symbols, which include the SQL layer's (`do_command`, `ha_commit_trans`,
`handler::ha_update_row`, ...) but none of InnoDB's, so the buckets are drawn at the handler and
transaction boundaries: what InnoDB does inside an `UPDATE` (index maintenance, undo) is "rows
updated", what it does at commit (redo write, fsync) is "commit", and the threads that serve no
connection (purge, the page cleaner, I/O completion) are "InnoDB background", by thread.

    .venv/bin/python bench/db_profile.py                       # 3,000 emails at 50 and at 0 ms
    .venv/bin/python bench/db_profile.py --latencies 50 --emails 1000 --keep
    .venv/bin/python bench/db_profile.py --no-perf             # the counters and thread CPU alone
    .venv/bin/python bench/db_profile.py --latencies 0 --variant "ALTER TABLE ..." --rounds 3
                             # the schema as migrated against it changed by the statements given
                             # (';'-separated), in alternating runs: each run's figures, then medians
    .venv/bin/python bench/db_profile.py --statements --emails 1000 --latencies 50
                             # no perf: performance_schema's statement events instead, per procedure
                             # called and per statement inside them (counts per email, server time)

perf's proportions hold on a loaded machine even where the wall-clock figures do not: the script
prints the 1-minute load before each run. Needs `perf` (linux-perf) able to record the server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness import CLK_TCK, ROOT, Bench
from scenarios.outbox import run_outbox

from email_outbox_devtools.dbserver import PrivateServer

COUNTERS = (
    "Questions", "Com_call_procedure", "Com_commit", "Com_select", "Com_update", "Com_insert",
    "Handler_commit", "Handler_write", "Handler_update", "Handler_delete", "Handler_read_key",
    "Handler_read_next", "Handler_read_rnd_next", "Innodb_os_log_written", "Innodb_data_fsyncs",
    "Innodb_buffer_pool_pages_flushed", "Innodb_buffer_pool_write_requests",
    "Bytes_received", "Bytes_sent", "Created_tmp_tables", "Opened_tables", "Connections",
)  # fmt: skip

# A connection's first CALL of a routine reads it from mysql.proc and parses it (its routine cache
# then holds it): all of that is this bucket, whatever frames are under it.
ROUTINE_LOAD = ("routine loaded (read from mysql.proc and parsed)", ("Sp_handler::db_find_routine",))
# The other buckets of the connection threads' samples, by the first of these frames found walking
# from the leaf towards the root: the innermost boundary the sample is under.
CALL_BUCKETS = (
    ("commit (redo write, fsync)", ("ha_commit_trans", "ha_commit_one_phase", "trans_commit")),
    ("rows inserted", ("handler::ha_write_row",)),
    ("rows updated", ("handler::ha_update_row", "handler::ha_bulk_update_row")),
    ("rows deleted", ("handler::ha_delete_row",)),
    ("rows read", ("handler::ha_index_", "handler::ha_rnd_", "handler::index_read", "handler::read_range",
                   "handler::multi_range_read", "handler::ha_index_read")),
    ("open, lock, close tables", ("open_tables", "open_and_lock_tables", "lock_tables", "mysql_lock_tables",
                                  "close_thread_tables", "mysql_unlock_tables", "handler::ha_external_lock",
                                  "close_thread_table", "handler::ha_reset")),
    ("optimizer", ("JOIN::optimize", "make_join_statistics", "SQL_SELECT::test_quick_select", "JOIN::prepare",
                   "st_select_lex::", "mysql_prepare_update", "setup_fields")),
    ("parse", ("parse_sql", "MYSQLparse")),
    ("network (read, write)", ("my_net_read", "my_net_write", "net_flush", "net_write_command", "vio_",
                               "Protocol::", "net_send_")),
)  # fmt: skip


@dataclass
class Sample:
    tid: int
    frames: list[tuple[str, str]]  # (symbol, dso), leaf first


def parse_perf_script(text: str) -> list[Sample]:
    """`perf script -F tid,ip,sym,dso` output: a line with the tid, then one line per frame."""
    samples: list[Sample] = []
    current: Sample | None = None
    frame = re.compile(r"^\s+[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$")
    for line in text.splitlines():
        if not line.strip():
            current = None
            continue
        if not line.startswith((" \t", "\t")) and (m := re.match(r"^\s*(\d+)\s*$", line)):
            current = Sample(int(m.group(1)), [])
            samples.append(current)
            continue
        if current is not None and (f := frame.match(line)):
            current.frames.append((f.group(1), f.group(2)))
    return samples


def classify(sample: Sample, thread_names: dict[int, str]) -> tuple[str, str]:
    """(bucket, detail) for one sample."""
    names = [sym for sym, _ in sample.frames]
    name = thread_names.get(sample.tid, "")
    connection = name == "thread/sql/one_connection" or any(
        n.startswith(("do_command", "do_handle_one_connection")) for n in names
    )
    if not connection:
        label = name.removeprefix("thread/") or "thread not named (I/O completion or exited pool thread)"
        return "InnoDB background and other threads", label
    kernel_leaf = bool(sample.frames) and "kernel" in sample.frames[0][1]
    if any(sym.startswith(ROUTINE_LOAD[1]) for sym in names):
        return ROUTINE_LOAD[0], "kernel" if kernel_leaf else "user"
    for sym in names:
        for bucket, prefixes in CALL_BUCKETS:
            if sym.startswith(prefixes):
                return bucket, "kernel" if kernel_leaf else "user"
    return "other command processing (SP runtime, items, THD)", "kernel" if kernel_leaf else "user"


def perf_available() -> bool:
    return shutil.which("perf") is not None


@dataclass
class Observation:
    status0: dict[str, int] = field(default_factory=dict)
    status1: dict[str, int] = field(default_factory=dict)
    threads0: dict[int, tuple[float, float]] = field(default_factory=dict)  # tid: (user s, system s)
    threads1: dict[int, tuple[float, float]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    seconds: float = 0.0


def thread_cpu(pid: int) -> dict[int, tuple[float, float]]:
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            out[int(task.name)] = (int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK)
    return out


def global_status(bench: Bench) -> dict[str, int]:
    conn = bench.server.root_connection()
    cur = conn.cursor()
    cur.execute("SHOW GLOBAL STATUS")
    out = {str(k): int(v) for k, v in cur.fetchall() if str(v).lstrip("-").isdigit()}  # type: ignore[misc]
    conn.close()
    return out


def thread_names(bench: Bench) -> dict[int, str]:
    conn = bench.server.root_connection()
    cur = conn.cursor()
    cur.execute("SELECT THREAD_OS_ID, NAME FROM performance_schema.threads WHERE THREAD_OS_ID IS NOT NULL")
    out = {int(t): str(n) for t, n in cur.fetchall()}  # type: ignore[misc]
    conn.close()
    return out


STATEMENT_EVENTS = 400_000
STATEMENTS_SERVER_ARGS = [
    "--performance-schema=ON", "--performance-schema-instrument=statement/%=ON",
    "--performance-schema-consumer-events-statements-current=ON",
    "--performance-schema-consumer-events-statements-history-long=ON",
    f"--performance-schema-events-statements-history-long-size={STATEMENT_EVENTS}",
    "--performance-schema-max-sql-text-length=4096",
]  # fmt: skip


def truncate_statements(bench: Bench) -> None:
    conn = bench.server.root_connection()
    conn.cursor().execute("TRUNCATE TABLE performance_schema.events_statements_history_long")
    conn.close()


def statement_summary(bench: Bench, emails: int) -> dict[str, Any]:
    """The statements the run executed, from performance_schema: the calls the clients made, by
    procedure, and every statement inside a procedure, by its routine and text. Times are the
    server's wall time of each (a CALL's includes what it ran), per email."""
    conn = bench.server.root_connection()
    cur = conn.cursor()
    cur.execute("SELECT COUNT(*) FROM performance_schema.events_statements_history_long")
    (events,) = cur.fetchone()  # type: ignore[misc]
    cur.execute(
        "SELECT IF(SQL_TEXT LIKE 'CALL %', REGEXP_SUBSTR(SQL_TEXT, '^CALL [a-z_]+'), LEFT(SQL_TEXT, 60)),"
        " COUNT(*), SUM(TIMER_WAIT) / 1e9 FROM performance_schema.events_statements_history_long"
        " WHERE NESTING_EVENT_ID IS NULL GROUP BY 1 ORDER BY 3 DESC"
    )
    top = [{"call": str(c), "per_email": int(n) / emails, "ms_per_email": float(t) / emails}
           for c, n, t in cur.fetchall()]  # type: ignore[misc]  # fmt: skip
    cur.execute(
        "SELECT OBJECT_NAME, EVENT_NAME, REGEXP_REPLACE(LEFT(SQL_TEXT, 400), '\\\\s+', ' '), COUNT(*),"
        " SUM(TIMER_WAIT) / 1e9, SUM(ROWS_EXAMINED), SUM(ROWS_AFFECTED), SUM(CREATED_TMP_TABLES)"
        " FROM performance_schema.events_statements_history_long"
        " WHERE NESTING_EVENT_ID IS NOT NULL AND EVENT_NAME NOT IN ('statement/sql/call_procedure')"
        " GROUP BY 1, 2, 3 ORDER BY 5 DESC"
    )
    nested = [
        {"routine": str(o), "event": str(e).removeprefix("statement/"), "text": str(t), "per_email": int(n) / emails,
         "ms_per_email": float(w) / emails, "rows_examined": int(x or 0) / emails, "rows_affected": int(a or 0) / emails,
         "tmp_tables": int(m or 0) / emails}
        for o, e, t, n, w, x, a, m in cur.fetchall()  # type: ignore[misc]
    ]  # fmt: skip
    conn.close()
    return {"events": int(events), "lost": int(events) >= STATEMENT_EVENTS, "calls": top, "nested": nested}


def print_statements(summary: dict[str, Any], limit: int) -> None:
    print(f"  statements: {summary['events']} events" + (" (the history filled: the run's start is lost)"
                                                          if summary["lost"] else ""))  # fmt: skip
    print("  the clients' statements (per email, server ms per email):")
    for c in summary["calls"]:
        print(f"    {c['per_email']:6.3f}  {c['ms_per_email']:.3f}  {c['call']}")
    print(f"  inside the procedures, the {limit} costliest (per email, ms/email, rows examined, tmp tables):")
    for n in summary["nested"][:limit]:
        print(f"    {n['per_email']:6.3f}  {n['ms_per_email']:.3f}  {n['rows_examined']:6.2f}  {n['tmp_tables']:.2f}"
              f"  {n['routine']}: {n['text'][:150]}")  # fmt: skip


class PerfRecorder:
    """perf attached to the server from the start, disabled until `enabled()` (its control FIFO)."""

    def __init__(self, pid: int, out: Path, frequency: int) -> None:
        self.out = out
        self.ctl = out.with_suffix(".ctl")
        self.ack = out.with_suffix(".ack")
        for fifo in (self.ctl, self.ack):
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()
            os.mkfifo(fifo)
        self.proc = subprocess.Popen(
            ["perf", "record", "-q", "-e", "cpu-clock", "-F", str(frequency), "--call-graph", "dwarf,65528",
             "-D", "-1", "--control", f"fifo:{self.ctl},{self.ack}", "-p", str(pid), "-o", str(out)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        # Both ends open before the first command: perf opens the FIFOs once it has attached.
        self._ctl = open(self.ctl, "w")  # noqa: SIM115 - closed in stop()
        self._ack = open(self.ack)  # noqa: SIM115

    def _command(self, cmd: str) -> None:
        self._ctl.write(cmd + "\n")
        self._ctl.flush()
        self._ack.readline()

    @contextlib.contextmanager
    def enabled(self) -> Iterator[None]:
        self._command("enable")
        try:
            yield
        finally:
            self._command("disable")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=120)
        self._ctl.close()
        self._ack.close()
        for fifo in (self.ctl, self.ack):
            fifo.unlink()


def attribute(perf_data: Path, names: dict[int, str]) -> dict[str, Any]:
    text = subprocess.run(
        ["perf", "script", "-i", str(perf_data), "-F", "tid,ip,sym,dso"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    samples = parse_perf_script(text)
    buckets: Counter[str] = Counter()
    details: Counter[tuple[str, str]] = Counter()
    kernel_leaf: Counter[str] = Counter()
    kernel_syms: Counter[str] = Counter()
    for s in samples:
        bucket, detail = classify(s, names)
        buckets[bucket] += 1
        details[(bucket, detail)] += 1
        if s.frames and "kernel" in s.frames[0][1]:
            kernel_leaf[bucket] += 1
            # The outermost kernel frame under user space: the system call or interrupt it came in by.
            entry = next((sym for sym, dso in reversed(s.frames) if "kernel" in dso), s.frames[0][0])
            kernel_syms[entry] += 1
    return {
        "samples": len(samples),
        "buckets": dict(buckets.most_common()),
        "details": {f"{b} / {d}": n for (b, d), n in details.most_common()},
        "kernel_leaf": dict(kernel_leaf.most_common()),
        "kernel_entries": dict(kernel_syms.most_common(12)),
    }


@dataclass
class Profile:
    latency_ms: float
    emails: int
    load_1min: float
    emails_per_s: float
    store_cpu_ms_per_email: float
    user_ms_per_email: float
    system_ms_per_email: float
    threads_ms_per_email: dict[str, float]
    counters_per_email: dict[str, float]
    perf: dict[str, Any] | None
    statements: dict[str, Any] | None = None


def profile_once(
    bench: Bench, latency_ms: float, emails: int, replicas: int, concurrency: int, base: Path,
    frequency: int, use_perf: bool, statements: bool = False,
) -> Profile:  # fmt: skip
    load = os.getloadavg()[0]
    obs = Observation()
    perf = (
        PerfRecorder(bench.server_pid, base / f"perf-{latency_ms:g}ms.data", frequency) if use_perf else None
    )

    @contextlib.contextmanager
    def observe() -> Iterator[None]:
        if statements:
            truncate_statements(bench)
        obs.status0 = global_status(bench)
        obs.threads0 = thread_cpu(bench.server_pid)
        started = time.monotonic()
        with perf.enabled() if perf else contextlib.nullcontext():
            yield
        obs.seconds = time.monotonic() - started
        obs.threads1 = thread_cpu(bench.server_pid)
        obs.status1 = global_status(bench)
        obs.names = thread_names(bench)

    try:
        run = run_outbox(bench, latency_ms / 1000, replicas, concurrency, emails, base, observe=observe)
    finally:
        if perf:
            perf.stop()
    per_email = 1000 / emails
    by_name: Counter[str] = Counter()
    user = system = 0.0
    for tid, (u1, s1) in obs.threads1.items():
        u0, s0 = obs.threads0.get(tid, (0.0, 0.0))
        user, system = user + u1 - u0, system + s1 - s0
        by_name[obs.names.get(tid, "not named").removeprefix("thread/")] += (u1 - u0 + s1 - s0) * per_email
    counters = {k: (obs.status1.get(k, 0) - obs.status0.get(k, 0)) / emails for k in COUNTERS}
    return Profile(
        latency_ms, emails, load, run.emails_per_s, run.store_cpu_ms_per_email, user * per_email,
        system * per_email, dict(by_name.most_common()), counters,
        attribute(perf.out, obs.names) if perf else None,
        statement_summary(bench, emails) if statements else None,
    )  # fmt: skip


def print_profile(p: Profile, limit: int) -> None:
    print(f"\n== {p.latency_ms:g} ms, {p.emails} emails, load {p.load_1min:.2f} before the run:"
          f" {p.emails_per_s:.0f} emails/s, server CPU {p.store_cpu_ms_per_email:.3f} ms/email"
          f" (threads alive at the end: user {p.user_ms_per_email:.3f}, system {p.system_ms_per_email:.3f})")  # fmt: skip
    print("  by thread (ms/email): " + ", ".join(f"{k} {v:.3f}" for k, v in p.threads_ms_per_email.items()))
    print("  per email: " + ", ".join(f"{k} {v:.2f}" for k, v in p.counters_per_email.items()))
    if p.perf:
        total = p.perf["samples"] or 1
        print(f"  perf: {total} samples; share of the server's CPU, and ms/email at the measured CPU:")
        for bucket, n in p.perf["buckets"].items():
            k = p.perf["kernel_leaf"].get(bucket, 0)
            print(f"    {100 * n / total:5.1f}%  {p.store_cpu_ms_per_email * n / total:.3f}  {bucket}"
                  f"  (in the kernel {100 * k / total:.1f}%)")  # fmt: skip
        print("  background threads and the kernel's entries:")
        for d, n in p.perf["details"].items():
            if d.startswith("InnoDB background"):
                print(f"    {100 * n / total:5.1f}%  {d.split(' / ', 1)[1]}")
        for sym, n in p.perf["kernel_entries"].items():
            print(f"    {100 * n / total:5.1f}%  kernel via {sym}")
    if p.statements:
        print_statements(p.statements, limit)


def summarize(profiles: list[dict[str, Any]], latency: float) -> None:
    """Medians per side at this latency: the server's CPU per email, and each perf bucket's ms per email."""
    print(f"\n== medians at {latency:g} ms")
    for side in dict.fromkeys(p["side"] for p in profiles):
        runs = [p for p in profiles if p["side"] == side and p["latency_ms"] == latency]
        cpu = statistics.median(p["store_cpu_ms_per_email"] for p in runs)
        each = ", ".join(f"{p['store_cpu_ms_per_email']:.3f}" for p in runs)
        loads = ", ".join(f"{p['load_1min']:.1f}" for p in runs)
        print(f"  {side}: {len(runs)} runs, server CPU {cpu:.3f} ms/email (runs: {each}), load {loads}")
        if all(p["perf"] for p in runs):
            buckets = dict.fromkeys(b for p in runs for b in p["perf"]["buckets"])
            for b in buckets:
                ms = statistics.median(
                    p["store_cpu_ms_per_email"]
                    * p["perf"]["buckets"].get(b, 0)
                    / max(1, p["perf"]["samples"])
                    for p in runs
                )
                print(f"    {ms:.3f}  {b}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--emails", type=int, default=3000)
    parser.add_argument("--latencies", default="50,0", help="provider latencies in ms, comma-separated")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--frequency", type=int, default=999, help="perf samples per second of CPU")
    parser.add_argument("--no-perf", action="store_true", help="the counters and thread CPU alone")
    parser.add_argument(
        "--statements", action="store_true",
        help="performance_schema's statement events instead of perf (which they would distort)",
    )  # fmt: skip
    parser.add_argument("--limit", type=int, default=40, help="statements inside procedures to print")
    parser.add_argument(
        "--variant", default="",
        help="statements (';'-separated) run on each fresh database after its migration: measured against"
        " the schema as migrated, in alternating runs",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="runs of each (of each side with --variant)")
    parser.add_argument("--keep", action="store_true", help="keep the perf data (its path is printed)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out"))
    args = parser.parse_args(argv)
    use_perf = not args.no_perf and not args.statements
    if use_perf and not perf_available():
        parser.error("perf is not on PATH (apt-get install linux-perf), or pass --no-perf")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="db-profile-", dir=out))
    # performance_schema for the threads' names, every instrument off so it costs nothing measurable;
    # or with the statement events (--statements).
    schema_args = STATEMENTS_SERVER_ARGS if args.statements else [
        "--performance-schema=ON", "--performance-schema-instrument=%=OFF",
        "--performance-schema-consumer-events-statements-current=OFF",
        "--performance-schema-consumer-statements-digest=OFF",
    ]  # fmt: skip
    server = PrivateServer(
        base / "db", durable=True, extra_args=["--innodb-buffer-pool-size=1G", *schema_args]
    )
    server.start()
    profiles: list[dict[str, Any]] = []
    variant = [x.strip() for x in args.variant.split(";") if x.strip()]
    sides = (("as migrated", []), ("variant", variant)) if variant else (("as migrated", []),)
    try:
        bench = Bench(server)
        for latency in (float(x) for x in args.latencies.split(",")):
            for k in range(args.rounds):
                for side, statements in sides if k % 2 == 0 else sides[::-1]:
                    bench.after_migrate = statements
                    p = profile_once(bench, latency, args.emails, args.replicas, args.concurrency, base,
                                     args.frequency, use_perf, args.statements)  # fmt: skip
                    print(f"\n[{side}, round {k + 1}]", end="")
                    print_profile(p, args.limit)
                    profiles.append({"side": side, **asdict(p)})
            if variant or args.rounds > 1:
                summarize(profiles, latency)
    finally:
        server.stop()
    (base / "profile.json").write_text(json.dumps(profiles, indent=2))
    if not args.keep:
        for data in base.glob("perf-*.data"):
            data.unlink()
    print(f"\nresults in {base / 'profile.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
