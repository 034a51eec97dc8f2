"""The database path alone: claim and finalize with no provider call, the per-row claim of the original
design (candidates, then email_try_claim per row) against email_claim_batch, at R processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import uuid
from dataclasses import dataclass
from typing import Any

from harness import Bench, enqueue_bulk, run_in_lockstep

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository


def _claim_process(
    dsn_url: str, path: str, batch: int, total: int, counts: Any, lost: Any, ready: Any, go: Any
) -> None:
    repo = OutboxRepository.open(DatabaseDsn.parse(dsn_url))
    me = f"db-{os.getpid()}"
    ready.release()
    go.wait()
    races = 0
    idle = 0
    while idle < 3:
        if path == "batch":
            # SKIP LOCKED never makes a batch claim fail; what it can cost is a short batch while rows
            # were left. Count that shortfall against what was unclaimed just before the call (an
            # upper bound: other replicas' claims in between count too).
            with counts.get_lock():
                remaining = total - counts.value
            token = uuid.uuid4().hex
            rows = repo.claim_batch(token, me, 60, batch)
            claimed = [(r.id, token) for r in rows]
            races += max(0, min(batch, remaining) - len(rows))
            with counts.get_lock():
                counts.value += len(rows)
        else:
            claimed = []
            for c in repo.claimable_candidates(batch):
                token = uuid.uuid4().hex
                if repo.try_claim(c.id, token, me, 60) == 1:
                    claimed.append((c.id, token))
                else:
                    races += 1
            with counts.get_lock():
                counts.value += len(claimed)
        if not claimed:
            idle += 1
            continue
        idle = 0
        for attempt_id, token in claimed:
            repo.finalize_sent(attempt_id, token, "m-" + token[:8])

    with lost.get_lock():
        lost.value += races
    repo.close()


@dataclass
class ClaimRun:
    path: str
    replicas: int
    emails_per_s: float
    lost_per_email: float


def run_claim_path(bench: Bench, path: str, replicas: int, emails: int, batch: int = 8) -> ClaimRun:
    dsn = bench.fresh_database()
    enqueue_bulk(dsn, emails, "db")
    counts, lost = mp.get_context("fork").Value("l", 0), mp.get_context("fork").Value("l", 0)
    elapsed = run_in_lockstep(
        _claim_process, [(dsn.url(), path, batch, emails, counts, lost) for _ in range(replicas)]
    ).seconds
    assert counts.value == emails, f"{path}: {counts.value} of {emails} finalized"
    return ClaimRun(path, replicas, emails / elapsed, lost.value / emails)
