"""The tiny form of bench/claim_priority.py: the priority claim's plan and time print, and the plan is
a range read of the priority index that reads only the rows it claims, with no sort."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_tiny_claim_priority_run_prints_a_range_read_without_a_sort() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "claim_priority.py"), "--tiny"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("| 2") and "ms |" in line]
    assert len(lines) == 4, result.stdout
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        index, access, rows_read, sort = cells[2], cells[3], cells[5], cells[6]
        assert (index, access, rows_read, sort) == (
            "ix_email_delivery_attempts_claim_queue",
            "range",
            "8",
            "none",
        ), line
