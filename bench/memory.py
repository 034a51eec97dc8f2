"""The worker's peak memory with large bodies (security review, finding 7): 8 emails of 16,000,000 bytes,
batch 8, concurrency 8, delivered by a real worker process to the local SES endpoint; and with large
attachments: 8 emails of 10,000,000 bytes of attachment each.

Two runs side by side: every body carried by the claim (the old behaviour, inline_body_bytes at its
maximum) and the default (bodies over 256 KiB loaded per send within a 64 MiB byte budget). Prints
the worker's peak RSS (VmHWM) for each.

    python bench/memory.py          # 8 x 16 MB
    python bench/memory.py --tiny   # 4 x 2 MB, three of the runs: the form `make test` runs
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import mysql.connector

from email_outbox import Attachment, Message, enqueue_message
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_endpoint import SesEndpoint
from email_outbox_devtools.worker_process import spawn_worker


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def run(
    server: PrivateServer,
    name: str,
    emails: int,
    size: int,
    out: Path,
    *,
    inline: int,
    budget: int,
    batch: int,
    attachments: bool = False,
) -> float:
    conn = mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
    conn.cursor().execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    conn.close()
    dsn = DatabaseDsn.parse(server.dsn(name))
    migrate_for_local_use(dsn)
    repo = OutboxRepository.open(dsn)
    for i in range(emails):
        if attachments:
            content = bytes(range(256)) * (size // 256)
            message = Message(to=[f"big{i}@example.com"], subject="large", text="see attached",
                              attachments=[Attachment(f"{i}.bin", "application/octet-stream", content)])  # fmt: skip
            enqueue_message(repo.connection, f"{name}-{i}", message)
        else:
            repo.enqueue(
                f"{name}-{i}", f"big{i}@example.com", "large", text_body=chr(ord("a") + i % 26) * size
            )
    with SesEndpoint() as endpoint:
        worker = spawn_worker(
            dsn, endpoint.url, out, name, env={"EMAIL_OUTBOX_POLL_INTERVAL": "0.2"},
            concurrency=8, batch_size=batch, inline_body_bytes=inline, body_memory_bytes=budget,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while len(endpoint.accepted()) < emails and time.monotonic() < deadline and worker.running():
            time.sleep(0.1)
        peak = peak_rss_mb(worker.pid)
        worker.terminate()
        assert len(endpoint.accepted()) == emails, f"{name}: only {len(endpoint.accepted())} of {emails} sent"
    repo.close()
    return peak


MIB = 1 << 20
RUNS = [
    ("batch 8, bodies carried by the claim (before)", 16_777_215, 16 * MIB, 8, False),
    ("batch 8, bodies loaded per send, 16 MiB budget (default)", 256 * 1024, 16 * MIB, 8, False),
    ("batch 1, bodies loaded per send, 16 MiB budget (default)", 256 * 1024, 16 * MIB, 1, False),
    ("batch 8, bodies loaded per send, 64 MiB budget", 256 * 1024, 64 * MIB, 8, False),
    # Attachments stay in their table until their send, within the same budget.
    ("batch 8, attachments loaded per send, 16 MiB budget (default)", 256 * 1024, 16 * MIB, 8, True),
    ("batch 8, attachments loaded per send, 64 MiB budget", 256 * 1024, 64 * MIB, 8, True),
]
# The tiny run: bodies carried by the claim, bodies loaded per send, attachments loaded per send; each
# path of the harness once (the budgets' effect is a figure of the full run).
TINY_RUNS = (0, 2, 4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args(argv)
    emails, size = (4, 2_000_000) if args.tiny else (8, 16_000_000)
    attachment_size = 2_000_000 if args.tiny else 10_000_000
    with tempfile.TemporaryDirectory(prefix="memory-") as base:
        server = PrivateServer(Path(base) / "db", extra_args=["--max-allowed-packet=256M"])
        server.start()
        try:
            results = {
                label: run(
                    server,
                    f"run{n}",
                    emails,
                    attachment_size if attach else size,
                    Path(base),
                    inline=inline,
                    budget=budget,
                    batch=batch,
                    attachments=attach,
                )
                for n, (label, inline, budget, batch, attach) in enumerate(RUNS)
                if not args.tiny or n in TINY_RUNS
            }
        finally:
            server.stop()
    print(f"{emails} emails of {size:,} bytes of body or {attachment_size:,} bytes of attachment, concurrency 8:"
          " the worker's peak RSS")  # fmt: skip
    for label, peak in results.items():
        print(f"  {label:<62} {peak:7.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
