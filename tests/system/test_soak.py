"""The crash-and-fault soak (bench/soak.py) in its short form: every fault kind fires at least once,
then the full accounting must hold. Run under both isolation levels the outbox supports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("isolation", "seed"),
    [("REPEATABLE-READ", 11), ("READ-COMMITTED", 12)],
    ids=["repeatable-read", "read-committed"],
)
def test_short_soak_accounts_for_every_email(isolation: str, seed: int, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "soak.py"), "--short", "--seed", str(seed),
         "--isolation", isolation, "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=400, cwd=ROOT,
    )  # fmt: skip
    print(result.stdout[-6000:])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "soak OK" in result.stdout
    assert "FAIL " not in result.stdout
    for fault in ("worker_kill9 ", "db_kill9_restart", "worker_crash_after_claim", "sigterm_rolling_restart"):
        assert fault.strip() + "=" in result.stdout, f"{fault} never fired"
