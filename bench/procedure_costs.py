"""What one call of each send-path procedure costs the database server: database only, one connection,
calls back to back, the same calls a worker makes.

Two measures, each on a server of its own:
- instructions per call, counted by valgrind's callgrind in the server's command processing only
  (do_command and all it calls, on every connection thread): the same count for the same code and
  inputs, run after run, whatever else the machine is doing. Judge a change to a procedure by it;
- server CPU ms per call on a plain durable server, five times as many calls: what a call costs here
  with the kernel, the log's fsync and InnoDB's background threads, and as noisy as the machine:
  compare within one run.

The calls:
- email_finalize_and_start, a Sent row's finalize and the next row's start: one per email while sends
  are slow (at 50 ms every email takes this path);
- email_finalize_batch of 8 Sent rows and 8 starts: one group commit at 0 ms provider latency, and of
  3 and 3, a group at 50 ms;
- email_reserve_batch of 8 and of 64 rows, and a reserve that finds nothing due;
- email_send_rate_take of 32 sends, a replica's slice of the shared send rate (2 x 8 slots ask for 32).

    python bench/procedure_costs.py           # 300 calls of each, 75 of the batch and the 64-row reserve
    python bench/procedure_costs.py --tiny    # the form `make test` runs

With --tenants N, the 8-row reserve only, counted per claimed row with the due rows in one tenant and
spread over N (operators' tenants, weight 1 each, so one reserve takes rows from several), beside
--terminal-rows Sent rows and 10,000 due rows in each database. A plain server on the same datadir writes every row, prints
the plans of one tenant's read and of the claim's walk of the tenants, and stops; the server is then
restarted under callgrind for the reserves alone, so the seed costs no valgrind time:

    python bench/procedure_costs.py --tenants 100 --terminal-rows 1000000 --calls 100

--idle-tenants M adds M tenants with no row at all, their pass (0) below the due tenants' (set to 1), so
the claim's walk meets them first:

    python bench/procedure_costs.py --tenants 100 --idle-tenants 1000 --terminal-rows 0 --calls 100
"""

from __future__ import annotations

import argparse
import glob
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from costs import fill_terminal_rows
from harness import Bench, enqueue_bulk, make_due, proc_cpu_seconds
from tenant_share import TENANT_SCAN, add_tenant, bulk_rows, walk_plan

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import FinalizeItem
from email_outbox_devtools.dbserver import PrivateServer

LEASE_SECONDS = 3600
INLINE_BODY_BYTES = 1 << 20
CPU_CALLS_FACTOR = 5
# Due rows in each --tenants database, as in bench/tenant_share.py's claim at 100 tenants.
DUE_ROWS = 10_000


class Meter:
    """Server work between start() and stop(); prepare() once first, with a round trip on the
    connection that will be measured."""

    def prepare(self, round_trip: Callable[[], object]) -> None: ...

    def pause(self) -> None:
        """Until resume(): the fixtures that follow need not be counted."""

    def resume(self, round_trip: Callable[[], object]) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> float:
        raise NotImplementedError


class CpuMeter(Meter):
    """Server CPU ms, from /proc: counted in ticks of 10 ms, so run enough calls to make many."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.began = 0.0

    def start(self) -> None:
        self.began = proc_cpu_seconds(self.pid)

    def stop(self) -> float:
        return (proc_cpu_seconds(self.pid) - self.began) * 1000


class InstructionMeter(Meter):
    """Thousands of instructions, counted by callgrind inside do_command only.

    Instrumentation is switched on once, in prepare(), and left on: callgrind switched on while a
    connection thread waits inside do_command knows nothing of that frame and begins counting only at
    its next command, so one round trip follows before anything is counted. The work between
    sections (fixtures) is counted too, and zeroed by the next start()."""

    def __init__(self, pid: int, out_prefix: Path) -> None:
        self.pid = pid
        self.out_prefix = out_prefix

    def _control(self, *args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(self.pid)], check=True, capture_output=True, timeout=120
        )

    def prepare(self, round_trip: Callable[[], object]) -> None:
        self._control("--instr=on")
        round_trip()

    def pause(self) -> None:
        # The fixtures' enqueues, instrumented, took most of a run's time under valgrind.
        self._control("--instr=off")

    def resume(self, round_trip: Callable[[], object]) -> None:
        self.prepare(round_trip)

    def start(self) -> None:
        self._control("--zero")

    def stop(self) -> float:
        before = set(glob.glob(f"{self.out_prefix}.*"))
        self._control("--dump")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for path in set(glob.glob(f"{self.out_prefix}.*")) - before:
                found = re.search(r"^totals: (\d+)$", Path(path).read_text(), re.MULTILINE)
                if found:
                    return int(found.group(1)) / 1000
            time.sleep(0.1)
        raise RuntimeError("callgrind wrote no profile")


def callgrind_launcher(out_prefix: Path) -> list[str]:
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--collect-atstart=no",
        "--toggle-collect=do_command(*",
        f"--callgrind-out-file={out_prefix}",
    ]


def server_args(binary: str, under_valgrind: bool) -> list[str]:
    args = ["--innodb-buffer-pool-size=256M"]
    if under_valgrind:
        # valgrind knows no io_uring, and cannot reserve the address space a server that can grow its
        # buffer pool maps at start (innodb_buffer_pool_size_max, where the server has it).
        args.append("--innodb-use-native-aio=0")
        help_text = subprocess.run([binary, "--verbose", "--help"], capture_output=True, text=True).stdout
        if "innodb-buffer-pool-size-max" in help_text:
            args.append("--innodb-buffer-pool-size-max=256M")
    return args


@dataclass
class Cost:
    call: str
    emails_per_call: int
    per_call: float


def _reserve(repo: OutboxRepository, token: str, limit: int) -> list[tuple[int, str]]:
    return [
        (c.id, token) for c in repo.reserve_batch(token, "bench", LEASE_SECONDS, limit, INLINE_BODY_BYTES)
    ]


def _reserve_all(repo: OutboxRepository, prefix: str, rows: int) -> list[tuple[int, str]]:
    held: list[tuple[int, str]] = []
    while len(held) < rows:
        got = _reserve(repo, f"{prefix}-{len(held)}", 64)
        if not got:
            raise RuntimeError(f"only {len(held)} of {rows} rows were due")
        held += got
    return held


def _due(dsn: DatabaseDsn, meter: Meter, prefix: str, rows: int, round_trip: Callable[[], object]) -> None:
    """`rows` rows due now, written while the meter does not count (a fixture, not a measured call)."""
    meter.pause()
    enqueue_bulk(dsn, rows, prefix, hold=True)
    make_due(dsn)
    meter.resume(round_trip)


def _sent(row: tuple[int, str]) -> FinalizeItem:
    return FinalizeItem(row[0], row[1], "Sent", provider_message_id=f"pm-{row[0]}")


def _finalizing(repo: OutboxRepository, rows: list[tuple[int, str]], size: int) -> Callable[[int], None]:
    """A group commit's call: the size rows sent in call i end, and the next size rows start."""

    def finalize_batch(i: int) -> None:
        done, following = rows[size * i : size * i + size], rows[size * i + size : size * i + 2 * size]
        items = [_sent(r) for r in done] + [FinalizeItem(r[0], r[1], "Started") for r in following]
        assert all(r.affected == 1 for r in repo.finalize_batch(items))

    return finalize_batch


def measure(dsn: DatabaseDsn, meter: Meter, calls: int) -> list[Cost]:
    repo = OutboxRepository.open(dsn)
    costs: list[Cost] = []

    def timed(name: str, emails: int, n: int, body: Callable[[int], None], warm: int = 1) -> None:
        """body(0) to body(warm - 1) untimed, then n calls timed: a procedure's first call on a connection
        also loads and parses it, which a worker's long-lived connection pays once."""
        for i in range(warm):
            body(i)
        meter.start()
        for i in range(warm, warm + n):
            body(i)
        costs.append(Cost(name, emails, meter.stop() / n))

    try:
        meter.prepare(repo.server_version)
        _due(dsn, meter, "fas", calls + 2, repo.server_version)
        rows = _reserve_all(repo, "fas", calls + 2)
        repo.start_send(*rows[0])

        def finalize_and_start(i: int) -> None:
            result, started = repo.finalize_and_start(_sent(rows[i]), *rows[i + 1])
            assert result.affected == 1 and started

        timed("email_finalize_and_start (Sent + start)", 1, calls, finalize_and_start)

        groups = max(1, calls // 4)
        for size in (8, 3):
            _due(dsn, meter, f"batch{size}", size * (groups + 3), repo.server_version)
            batch_rows = _reserve_all(repo, f"batch{size}", size * (groups + 3))
            for row in batch_rows[:size]:
                repo.start_send(*row)
            # Two untimed: the first call that makes the session's working table leaves the procedure
            # to be loaded again by the next (once per connection).
            body = _finalizing(repo, batch_rows, size)
            timed(f"email_finalize_batch ({size} Sent + {size} starts)", size, groups, body, warm=2)

        def reserving(limit: int, expected: int) -> Callable[[int], None]:
            return lambda i: _check_rows(_reserve(repo, f"r{limit}-{expected}-{i}", limit), expected)

        for limit, n in ((8, calls), (64, groups)):
            _due(dsn, meter, f"reserve{limit}", limit * (n + 1), repo.server_version)
            timed(f"email_reserve_batch ({limit} rows)", limit, n, reserving(limit, limit))
        timed("email_reserve_batch (nothing due)", 0, calls, reserving(8, 0))

        # A replica's slice of the shared send rate: once per 4 x its slots of sends (SLOTS_PER_ASK).
        # At the highest rate a slice is 3.4 ms of the schedule: counted (under callgrind each take
        # is slower than that) every ask is granted whole; timed, later ones may wait instead.
        repo.send_rate_report("bench", 10_000, "override", 9_500, None, None, None)

        def rate_take(i: int) -> None:
            repo.send_rate_take("bench", 32, 0, 3600)

        timed("email_send_rate_take (32 sends)", 32, calls, rate_take)
    finally:
        repo.close()
    return costs


def _check_rows(rows: list[tuple[int, str]], expected: int) -> None:
    assert len(rows) == expected, f"reserved {len(rows)} rows, expected {expected}"


def run(base: Path, calls: int, under_valgrind: bool, variant: list[str] | None = None) -> list[Cost]:
    out_prefix = base / "callgrind.out"
    server = PrivateServer(base / "db", durable=True, buffer_pool_size=None)
    server.extra_args = server_args(server.binary, under_valgrind)
    try:
        server.start(timeout=60)
        dsn = Bench(server, after_migrate=variant or []).fresh_database()
        if under_valgrind:
            # The migrations ran on the plain server, on the same datadir: under valgrind they took a
            # good part of the run.
            server.stop()
            server.launcher = callgrind_launcher(out_prefix)
            # Well inside the tiny test's own timeout, so a server that does not come up is stopped here.
            server.start(timeout=240)
        assert server.process is not None
        pid = server.process.pid
        meter: Meter = InstructionMeter(pid, out_prefix) if under_valgrind else CpuMeter(pid)
        return measure(dsn, meter, calls)
    finally:
        server.stop()


@dataclass
class TenantSeed:
    tenants: int
    dsn: DatabaseDsn
    tenant_read: dict[str, object]
    walk: str


def seed_tenants(
    server: PrivateServer, bench: Bench, tenants: int, terminal: int, rows: int, idle: int = 0
) -> TenantSeed:
    """A database with `terminal` Sent rows and `rows` due rows spread evenly over `tenants` tenants
    (one priority, so only the tenants differ), and `idle` tenants with no row whose pass is below the
    due tenants', analyzed, with the plans the claim's reads get."""
    dsn = bench.fresh_database()
    fill_terminal_rows(server, dsn.database, terminal)
    repo = OutboxRepository.open(dsn)
    try:
        for t in range(tenants):
            add_tenant(repo, f"t{t:03d}")
            bulk_rows(repo, f"t{t:03d}", -(-rows // tenants), 5, f"t{t}-")
        for t in range(idle):
            add_tenant(repo, f"idle{t:04d}")
        cursor = repo.connection.cursor(dictionary=True)
        if idle:
            cursor.execute("UPDATE email_tenants SET pass = IF(name LIKE 'idle%', 0, 1)")
            repo.connection.commit()
        cursor.execute("ANALYZE TABLE email_delivery_attempts")
        cursor.fetchall()
        cursor.execute("SELECT id FROM email_tenants WHERE name = 't000'")
        (first,) = cursor.fetchall()
        cursor.execute("EXPLAIN " + TENANT_SCAN.replace("%s", str(first["id"])))
        (tenant_read,) = cursor.fetchall()
        due_probe = walk_plan(cursor)
        cursor.close()
    finally:
        repo.close()
    return TenantSeed(tenants, dsn, tenant_read, due_probe)


def run_tenants(
    base: Path, spreads: list[int], terminal: int, calls: int, idle: int = 0
) -> list[tuple[TenantSeed, float]]:
    """Thousand instructions per claimed row of an 8-row reserve, for each spread of the due rows."""
    out_prefix = base / "callgrind.out"
    server = PrivateServer(base / "db", durable=True, buffer_pool_size=None)
    server.extra_args = server_args(server.binary, under_valgrind=True)
    bench = Bench(server)
    try:
        server.start(timeout=60)
        seeds = [
            seed_tenants(server, bench, n, terminal, max(DUE_ROWS, 8 * (calls + 4)), idle) for n in spreads
        ]
        server.stop()
        server.launcher = callgrind_launcher(out_prefix)
        server.start(timeout=600)
        assert server.process is not None
        meter = InstructionMeter(server.process.pid, out_prefix)
        results = []
        for seed in seeds:
            repo = OutboxRepository.open(seed.dsn)
            try:
                meter.prepare(repo.server_version)
                for w in range(3):
                    _check_rows(_reserve(repo, f"warm-{w}", 8), 8)
                meter.start()
                for i in range(calls):
                    _check_rows(_reserve(repo, f"t{seed.tenants}-{i}", 8), 8)
                results.append((seed, meter.stop() / (8 * calls)))
            finally:
                repo.close()
        return results
    finally:
        server.stop()


def _plan(row: dict[str, object]) -> str:
    if not row["key"]:
        return str(row["Extra"])
    return f"{row['type']} on {row['key']}, {row['rows']} rows estimated ({row['Extra'] or 'nothing extra'})"


def report_tenants(results: list[tuple[TenantSeed, float]], terminal: int, calls: int, idle: int = 0) -> None:
    print(
        f"\nemail_reserve_batch of 8 rows, {calls} calls counted, beside {terminal:,} Sent rows"
        f" and {idle:,} idle tenants: thousand instructions per claimed row (do_command only)"
    )
    print(
        "| tenants with due rows | per claimed row | vs one tenant | one tenant's read | the walk of the tenants |"
    )
    print("|---:|---:|---:|---|---|")
    one = results[0][1]
    for seed, per_row in results:
        cells = [f"{per_row:,.0f}", f"{per_row / one:.2f}x", _plan(seed.tenant_read), seed.walk]
        print(f"| {seed.tenants} | {' | '.join(cells)} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a few calls of each: proves the harness runs")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument(
        "--tenants", type=int, default=0, help="count the 8-row reserve per claimed row with 1 and N tenants"
    )
    parser.add_argument(
        "--terminal-rows", type=int, default=0, help="Sent rows beside the due ones (--tenants)"
    )
    parser.add_argument(
        "--idle-tenants",
        type=int,
        default=0,
        help="tenants with no row, their pass below the due ones' (--tenants)",
    )
    parser.add_argument(
        "--variant", default="",
        help="statements (';'-separated) run on the fresh database after its migration: a schema to compare",
    )  # fmt: skip
    parser.add_argument("--no-cpu", action="store_true", help="the instruction counts alone (no timed run)")
    args = parser.parse_args(argv)
    calls = 8 if args.tiny else args.calls
    variant = [x.strip() for x in args.variant.split(";") if x.strip()]
    if args.tenants:
        base = Path(tempfile.mkdtemp(prefix="procedure-costs-"))
        try:
            results = run_tenants(
                base, sorted({1, args.tenants}), args.terminal_rows, calls, args.idle_tenants
            )
        finally:
            shutil.rmtree(base, ignore_errors=True)
        report_tenants(results, args.terminal_rows, calls, args.idle_tenants)
        return 0
    valgrind = shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None
    if not valgrind:
        print("valgrind not found (apt-get install valgrind): server CPU only, no instruction counts")
    base = Path(tempfile.mkdtemp(prefix="procedure-costs-"))
    try:
        # /proc counts CPU in 10 ms ticks: five times the calls on the plain server make enough of them.
        cpu = None if args.no_cpu else run(base / "cpu", CPU_CALLS_FACTOR * calls, False, variant)
        instructions = run(base / "callgrind", calls, True, variant) if valgrind else None
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(
        f"\nprocedure costs, database only, back to back on one connection, durable: {calls} calls of each"
        f" counted (a quarter as many of the batch and the 64-row reserve), {CPU_CALLS_FACTOR} times as many timed"
    )
    print(
        "| call | emails per call | thousand instructions per call | per email | server CPU ms per call | per email |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for k, cost in enumerate(cpu or instructions or []):
        count = instructions[k].per_call if instructions else None
        per = max(cost.emails_per_call, 1)
        cells = [
            f"{count:,.0f}" if count is not None else "-",
            f"{count / per:,.0f}" if count is not None and cost.emails_per_call else "-",
            f"{cost.per_call:.3f}" if cpu else "-",
            f"{cost.per_call / per:.3f}" if cpu and cost.emails_per_call else "-",
        ]
        print(f"| {cost.call} | {cost.emails_per_call} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
