"""Small helpers shared by the test modules."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from email_outbox.db.repository import OutboxRepository

ROOT = Path(__file__).resolve().parents[2]


def run_bench(script: str, *args: str, timeout: float = 600) -> str:
    """bench/`script` with `args` in a process of its own, as a user runs it: its standard output,
    printed for the test's log, once it has exited 0 (else the tail of both streams fails the test)."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def token() -> str:
    return uuid.uuid4().hex


def enqueue_many(repo: OutboxRepository, count: int, prefix: str = "n", **kwargs: Any) -> list[int]:
    ids = []
    for i in range(count):
        result = repo.enqueue(
            f"{prefix}-{i}", f"user{i}@example.com", f"subject {i}", text_body="hello", **kwargs
        )
        ids.append(result.attempt_id)
    return ids


def scalar(repo: OutboxRepository, sql: str, args: tuple[Any, ...] = ()) -> Any:
    cursor = repo.connection.cursor()
    cursor.execute(sql, args)
    row = cursor.fetchone()
    cursor.fetchall()
    cursor.close()
    return None if row is None else row[0]  # type: ignore[index]


def deadlocks(repo: OutboxRepository) -> int:
    """Server-wide deadlock counter (MariaDB: Innodb_deadlocks; MySQL: the lock_deadlocks metric)."""
    cursor = repo.connection.cursor()
    cursor.execute("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'")
    row = cursor.fetchone()
    cursor.fetchall()
    if row is None:
        cursor.execute("SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_deadlocks'")
        row = cursor.fetchone()
        cursor.fetchall()
    cursor.close()
    return int(row[1] if len(row) > 1 else row[0])  # type: ignore[arg-type,index]
