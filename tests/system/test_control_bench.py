"""The tiny form of bench/claim_priority.py: the priority claim's plan and time print, and the plan is
a range read of the priority index that reads only the rows it claims, with no sort."""

from __future__ import annotations

import pytest

from tests.support.helpers import run_bench


@pytest.mark.slow
def test_tiny_claim_priority_run_prints_a_range_read_without_a_sort() -> None:
    output = run_bench("claim_priority.py", "--tiny")
    lines = [line for line in output.splitlines() if line.startswith("| 2") and "ms |" in line]
    assert len(lines) == 4, output
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        index, access, rows_read, sort = cells[2], cells[3], cells[5], cells[6]
        assert (index, access, rows_read, sort) == (
            "ix_email_delivery_attempts_claim_queue",
            "range",
            "8",
            "none",
        ), line
