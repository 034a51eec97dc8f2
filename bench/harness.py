"""The benchmark harness: what every scenario shares.

A private durable database server and a fresh database per run (`Bench`), the local SES endpoint in
a process of its own (`Endpoint`, which also counts lost and duplicated sends by the unique id each
send carries in an `outbox_id` EmailTag), the backlog fixtures (`enqueue_bulk`, `make_due`), the
wait for a drained outbox, CPU and RSS from /proc, and `run_in_lockstep`, which releases a set of
processes together and times them. Scenarios live in bench/scenarios/, the report in bench/report.py,
the run order in bench/throughput.py.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox_devtools.dbserver import PrivateServer, free_port
from email_outbox_devtools.localdb import migrate_for_local_use

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def process_tree(pid: int) -> list[int]:
    """`pid` and every process descended from it (a broker that forks helpers: RabbitMQ's beam.smp
    and its erl_child_setup), so a store's CPU counts all of its processes."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def cpu_seconds(pids: Iterable[int]) -> float:
    """The CPU of processes that may have exited meanwhile (they count nothing more)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            total += proc_cpu_seconds(pid)
    return total


def proc_peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Endpoint:
    """The local SES endpoint in a process of its own, so its work is not charged to the harness."""

    def __init__(self, latency: float) -> None:
        self.port = free_port()
        # The endpoint writes its control API's bearer token here (0600, in a directory of our own).
        self._token_dir = tempfile.TemporaryDirectory(prefix="ses-endpoint-")
        token_file = Path(self._token_dir.name) / "control-token"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "email_outbox_devtools.ses_endpoint", "--port", str(self.port),
             "--latency", str(latency), "--control-token-file", str(token_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.url = f"http://127.0.0.1:{self.port}"
        self._token = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                self._token = token_file.read_text().strip()
                self._control("/health", timeout=1).read()
                return
            time.sleep(0.05)
        raise RuntimeError("the SES endpoint did not start")

    def _control(self, path: str, timeout: float, method: str = "GET") -> Any:
        request = urllib.request.Request(
            self.url + "/_control" + path,
            method=method,
            data=b"" if method != "GET" else None,
            headers={"Authorization": f"Bearer {self._token}"},
        )
        return urllib.request.urlopen(request, timeout=timeout)

    def accepted_count(self) -> int:
        with self._control("/accepted", timeout=30) as r:
            return len(json.loads(r.read()))

    def sends(self) -> int:
        """Send requests taken so far: a cheap count to poll (the accepted list is read once, after)."""
        with self._control("/health", timeout=10) as r:
            return int(json.loads(r.read())["requests"])

    def _accepted(self) -> list[dict[str, Any]]:
        with self._control("/accepted", timeout=60) as r:
            records: list[dict[str, Any]] = json.loads(r.read())
            return records

    def id_counts(self) -> Counter[str]:
        """How many times the endpoint accepted each `outbox_id` EmailTag."""
        return Counter(str(m["tags"].get("outbox_id")) for m in self._accepted())

    def seconds_to_last_send(self, started_at: float) -> float:
        """From `started_at` (time.time()) until the endpoint accepted its last send, by the stamp it
        put on that send on the same clock. Every system's run ends here: "sent" is SES's answer,
        whatever each system does after it, and no polling interval of the harness's is counted."""
        return max(float(m["accepted_at"]) for m in self._accepted()) - started_at

    def reset(self) -> None:
        self._control("/reset", timeout=10, method="POST").read()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self._token_dir.cleanup()


def lost_and_duplicates(counts: Counter[str], expected: list[str]) -> tuple[int, int]:
    """Expected ids the endpoint never accepted, and ids it accepted more than once."""
    return sum(1 for i in expected if counts[i] == 0), sum(1 for i in expected if counts[i] > 1)


def aws_env(endpoint_url: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL_SESV2": endpoint_url,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }


@dataclass
class Bench:
    server: PrivateServer
    names: Iterator[int] = field(default_factory=lambda: iter(range(1, 10**9)))
    # Statements run on each fresh database once it is migrated: a schema variant to measure
    # (bench/db_profile.py --variant).
    after_migrate: list[str] = field(default_factory=list)

    def fresh_database(self) -> DatabaseDsn:
        name = f"bench_{next(self.names)}"
        conn = mysql.connector.connect(host="127.0.0.1", port=self.server.port, user="root", autocommit=True)
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS {name}")
        cur.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        conn.close()
        dsn = DatabaseDsn.parse(self.server.dsn(name))
        migrate_for_local_use(dsn)
        if self.after_migrate:
            conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
            for statement in self.after_migrate:
                conn.cursor().execute(statement)
            conn.close()
        return dsn

    @property
    def server_pid(self) -> int:
        assert self.server.process is not None
        return self.server.process.pid

    def status(self, name: str) -> int:
        conn = mysql.connector.connect(host="127.0.0.1", port=self.server.port, user="root")
        cur = conn.cursor()
        cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
        row = cur.fetchone()
        conn.close()
        return int(row[1]) if row else 0  # type: ignore[index, arg-type]


def enqueue_bulk(
    dsn: DatabaseDsn, n: int, prefix: str, per_commit: int = 200, connections: int = 4, hold: bool = False
) -> None:
    """n emails through email_enqueue; with `hold` they are due an hour from now (see make_due)."""
    send_after = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1) if hold else None

    def part(k: int) -> None:
        conn = mysql.connector.connect(**dsn.connect_args(), autocommit=False)
        cur = conn.cursor()
        for start in range(k, n, connections * per_commit):
            conn.start_transaction()
            for i in range(start, min(start + per_commit, n)):
                cur.execute(
                    "CALL email_enqueue(%s, %s, NULL, %s, %s, NULL, NULL, %s)",
                    (f"{prefix}-{i}", f"user{i}@example.com", f"subject {i}", "hello", send_after),
                )
                cur.fetchall()
                while cur.nextset():
                    pass
            conn.commit()
        conn.close()

    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(part, [i * per_commit for i in range(connections)]))


def make_due(dsn: DatabaseDsn) -> None:
    """A benchmark fixture, not a transition: make every held row due now, so timing starts with the
    workers already up (their start-up is not charged to the outbox; the bare loop's is not either)."""
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute(
        "UPDATE email_delivery_attempts SET next_attempt_at = UTC_TIMESTAMP(6) WHERE status = 'Pending'"
    )
    conn.close()


def open_count(dsn: DatabaseDsn) -> int:
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute(
        "SELECT COUNT(*) FROM email_delivery_attempts WHERE status IN ('Pending','Retrying','Processing')"
    )
    (n,) = cur.fetchone()  # type: ignore[misc]
    conn.close()
    return int(n)


def bulk_ids(dsn: DatabaseDsn) -> list[str]:
    """The ids the worker tags its sends with (OUTBOX_ID_TAG), for the backlog rows."""
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cur = conn.cursor()
    cur.execute("SELECT id FROM email_delivery_attempts WHERE notification_id LIKE 'bulk-%'")
    ids = [str(r[0]) for r in cur.fetchall()]  # type: ignore[index]
    conn.close()
    return ids


STALL_SECONDS = 2.0


def wait_drained(
    dsn: DatabaseDsn, endpoint: Endpoint | None = None, emails: int = 0, timeout: float = 900
) -> None:
    """Until no row is open. With `endpoint`, first until it has taken `emails` sends, or its count
    has stood still for `STALL_SECONDS` (a row that ends without a send), polled there as the Celery
    peer's run is: a poll of the database costs its server about 0.9 ms at 4,000 open rows (a
    connection and a count), which the outbox's CPU per email would otherwise carry."""
    deadline = time.monotonic() + timeout
    seen, moved = -1, time.monotonic()
    while endpoint is not None and seen < emails and time.monotonic() - moved < STALL_SECONDS:
        if (now_seen := endpoint.sends()) > seen:
            seen, moved = now_seen, time.monotonic()
        time.sleep(0.05)
    while open_count(dsn) > 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the outbox did not drain")
        time.sleep(0.05)


@dataclass(frozen=True)
class Lockstep:
    released_at: float  # time.time() at the release, the clock the endpoint stamps its sends with
    seconds: float  # from the release until the last process finished


def run_in_lockstep(target: Callable[..., None], args: list[tuple[Any, ...]]) -> Lockstep:
    """Start one process per args tuple, wait until every one is ready, release them together, and
    time them from the release until the last one finished."""
    ctx = mp.get_context("fork")
    ready, go = ctx.Semaphore(0), ctx.Event()
    procs = [ctx.Process(target=target, args=(*a, ready, go)) for a in args]
    for p in procs:
        p.start()
    for _ in procs:
        if not ready.acquire(timeout=60):
            raise RuntimeError(f"a {target.__name__} process did not start")
    released_at, started = time.time(), time.monotonic()
    go.set()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        raise RuntimeError(f"a {target.__name__} process failed")
    return Lockstep(released_at, time.monotonic() - started)
