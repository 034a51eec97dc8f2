"""The fault run (bench/faults.py) in its short form: a 3-node Galera cluster in network namespaces,
two real workers whose DSNs list every node, an enqueuing service on every node; each fault once
(kill -9 of every node and the documented recovery, a partition of one node then another, a node
paused past the lease, a worker paused past its lease with sends in flight, a worker killed in its
group commit) and the checker over the whole history. `make faults` runs the full size."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from email_outbox_devtools.netns_galera import missing_parts
from tests.support.helpers import run_bench

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.slow,
    pytest.mark.skipif(missing_parts() is not None, reason=str(missing_parts())),
]


def test_each_fault_loses_no_committed_enqueue_and_sends_none_twice(tmp_path: Path) -> None:
    output = run_bench("faults.py", "--short", "--out", str(tmp_path), timeout=600)
    rows = {
        m.group(1): [int(v) if v.isdigit() else float(v) for v in m.group(2, 3, 4, 5, 6)]
        for m in re.finditer(r"^\| (\w+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \|", output, re.M)
    }
    assert set(rows) == {
        "kill_all_nodes",
        "partition",
        "node_pause",
        "worker_pause",
        "worker_kill_group_commit",
    }
    for fault, (emails, lost, twice, _unknown, stall) in rows.items():
        assert emails > 0 and lost == 0 and twice == 0, fault
        if fault in ("partition", "node_pause"):
            assert stall < 10, f"{fault}: accepted sends stopped for {stall}s"
    assert "faults OK" in output
