"""The tiny form of bench/tenant_share.py: a real worker at 50 sends/s shares among tenants as the
fairness targets say (a trickle of one tenant's emails beside another's backlog at a higher priority
all go out at once; weights 3:1 give about 3:1), and one tenant's claim read is a range read of its
index that reads only the rows it claims, with no sort."""

from __future__ import annotations

import re

import pytest

from tests.support.helpers import run_bench


@pytest.mark.slow
def test_tiny_tenant_share_run_prints_fair_shares_and_a_range_read() -> None:
    output = run_bench("tenant_share.py", "--tiny")
    trickle = re.search(r"B sent (\d+)/(\d+), enqueue to SES accepted p50 [\d.]+ s, max ([\d.]+) s", output)
    assert trickle and trickle.group(1) == trickle.group(2), output
    assert float(trickle.group(3)) <= 2.0, "every B email within 2 s of its enqueue"
    ratio = re.search(r"ratio ([\d.]+)", output)
    assert ratio and 2.4 <= float(ratio.group(1)) <= 3.6, output
    (line,) = [line for line in output.splitlines() if line.startswith("| 1,000 | 10 |")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert (cells[2], cells[3], cells[4], cells[5]) == (
        "ix_email_delivery_attempts_tenant_queue",
        "range",
        "8",
        "none",
    ), line
