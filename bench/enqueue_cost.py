"""What one email_enqueue_message of a large message costs the database server: server CPU seconds
(from /proc, the server's user and system time) and wall seconds of one CALL, on a private server,
one connection, for

- 100 attachments of about 5 MB together (the case issue 38's review measured), and
- the largest message the outbox accepts: 100 attachments and bodies, 40 MB with the attachments in
  base64 (SES's limit, checked by the procedure).

    python bench/enqueue_cost.py           # each case three times, the median (--runs N)
    python bench/enqueue_cost.py --tiny    # the form `make test` runs: 10 attachments, 200 KB, once
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness import Bench, proc_cpu_seconds

from email_outbox.db.repository import OutboxRepository
from email_outbox_devtools.dbserver import PrivateServer

# SES's limit as email_enqueue_message counts it: bodies and base64 attachments together.
LARGEST = 41_943_040


@dataclass(frozen=True)
class Case:
    name: str
    attachments: int
    base64_bytes: int  # all attachments together, in base64


def message(case: Case) -> str:
    each = case.base64_bytes // case.attachments // 4 * 3  # raw bytes whose base64 has that length
    content = base64.b64encode(bytes(range(256)) * (each // 256) + b"\0" * (each % 256)).decode()
    return json.dumps(
        {
            "to": ["ann@example.com"],
            "subject": "large",
            "text": "see attached",
            "attachments": [
                {
                    "filename": f"part-{i}.bin",
                    "content_type": "application/octet-stream",
                    "content_base64": content,
                }
                for i in range(case.attachments)
            ],
        }
    )


def measure(repo: OutboxRepository, pid: int, case: Case, runs: int) -> tuple[float, float]:
    document = message(case)
    cpu, wall = [], []
    for run in range(runs):
        began_cpu, began = proc_cpu_seconds(pid), time.perf_counter()
        result = repo.enqueue_message(f"{case.name}-{run}", document)
        wall.append(time.perf_counter() - began)
        cpu.append(proc_cpu_seconds(pid) - began_cpu)
        assert result.affected == 1, result
    return statistics.median(cpu), statistics.median(wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="one small case once: proves the harness runs")
    parser.add_argument("--runs", type=int, default=3, help="calls of each case; the median is shown")
    args = parser.parse_args(argv)
    if args.tiny:
        cases, runs = [Case("tiny", 10, 200_000)], 1
    else:
        text = len("see attached")
        cases = [
            Case("100 attachments, 5.3 MB", 100, 5_300_000),
            Case("largest: 100 attachments, 40 MB", 100, LARGEST - text),
        ]
        runs = args.runs
    base = Path(tempfile.mkdtemp(prefix="enqueue-cost-"))
    server = PrivateServer(base / "db", durable=True, buffer_pool_size="1G")
    server.extra_args = ["--max-allowed-packet=256M"]
    try:
        server.start(timeout=60)
        bench = Bench(server)
        dsn = bench.fresh_database()
        repo = OutboxRepository.open(dsn)
        try:
            rows = [(case, *measure(repo, bench.server_pid, case, runs)) for case in cases]
        finally:
            repo.close()
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
    print(f"\nemail_enqueue_message of one large message, private server, one connection, median of {runs}")
    print("| message | attachments | base64 MB | server CPU s | wall s |")
    print("|---|---:|---:|---:|---:|")
    for case, cpu, wall in rows:
        print(
            f"| {case.name} | {case.attachments} | {case.base64_bytes / 1e6:.1f} | {cpu:.2f} | {wall:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
