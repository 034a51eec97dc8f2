"""The fault runs (bench/faults.py) in their short form, each fault once with a few hundred emails and
the checker over the whole history: on a 3-node Galera cluster in network namespaces (kill -9 of every
node and the documented recovery, a partition of one node then another, a node paused past the lease,
a worker paused past its lease with sends in flight, a worker killed in its group commit) and on a
semi-synchronous primary/replica pair (the primary cut off its replica, the primary paused, the
workers' faults, then the failover). Two real workers whose DSNs list every server. The stalls are
printed, not asserted: a timing under the whole suite's load says little (docs/reliability.md has
the full runs'). `make faults` runs the full size."""

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


def _rows(output: str) -> dict[str, tuple[int, int, int]]:
    """Each phase's emails, lost and sent twice, from the printed table."""
    return {
        m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)))
        for m in re.finditer(r"^\| (\w+) \| (\d+) \| (\d+) \| (\d+) \|", output, re.M)
    }


@pytest.mark.parametrize(
    ("topology", "faults"),
    [
        ([], {"kill_all_nodes", "partition", "node_pause", "worker_pause", "worker_kill_group_commit"}),
        (["--pair"], {"partition", "node_pause", "worker_pause", "worker_kill_group_commit", "failover"}),
    ],
    ids=["galera", "semi-sync-pair"],
)
def test_each_fault_loses_no_committed_enqueue_and_sends_none_twice(
    tmp_path: Path, topology: list[str], faults: set[str]
) -> None:
    output = run_bench("faults.py", "--short", *topology, "--out", str(tmp_path), timeout=600)
    rows = _rows(output)
    assert set(rows) == faults
    for fault, (emails, lost, twice) in rows.items():
        assert emails > 0 and lost == 0 and twice == 0, fault
    assert "faults OK" in output
