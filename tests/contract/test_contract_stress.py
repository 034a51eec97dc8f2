"""Mixed load on the real server: claims (both paths), finalizes, releases, sweeps and enqueues together.

docs/design.md section 5: range sweeps and secondary-index plans deadlocked here in other shapes. The
procedures must show zero deadlocks, counted both by the clients (error 1213) and by the server.
"""

from __future__ import annotations

import os
import random
import threading
import time

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import TransientDatabaseError
from email_outbox.models import Status
from tests.support.helpers import deadlocks, enqueue_many, scalar, token

DURATION = float(os.environ.get("EMAIL_OUTBOX_STRESS_SECONDS", "10"))


def test_mixed_stress_has_zero_deadlocks(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    enqueue_many(repo, 400, prefix="seed")
    server_deadlocks_before = deadlocks(repo)
    stop = time.monotonic() + DURATION
    client_deadlocks: list[str] = []
    errors: list[BaseException] = []
    ops = {
        "claim_batch": 0,
        "try_claim": 0,
        "sent": 0,
        "failure": 0,
        "unknown": 0,
        "release": 0,
        "sweep": 0,
        "enqueue": 0,
        "extend": 0,
    }
    lock = threading.Lock()

    def count(op: str) -> None:
        with lock:
            ops[op] += 1

    def worker(seed: int) -> None:
        rnd = random.Random(seed)
        r = OutboxRepository.open(dsn)
        name = f"stress-{seed}"
        try:
            while time.monotonic() < stop:
                try:
                    tok = token()
                    if rnd.random() < 0.5:
                        rows = [(c.id) for c in r.claim_batch(tok, name, 1, rnd.randint(1, 8))]
                        count("claim_batch")
                    else:
                        rows = [
                            c.id for c in r.claimable_candidates(5) if r.try_claim(c.id, tok, name, 1) == 1
                        ]
                        count("try_claim")
                    for attempt_id in rows:
                        choice = rnd.random()
                        if choice < 0.45:
                            r.finalize_sent(attempt_id, tok, "m")
                            count("sent")
                        elif choice < 0.6:
                            r.finalize_failure(
                                attempt_id,
                                tok,
                                permanent=False,
                                error_code="e",
                                error_message="m",
                                retry_delay_seconds=0,
                            )
                            count("failure")
                        elif choice < 0.7:
                            r.finalize_unknown(attempt_id, tok, "x")
                            count("unknown")
                        elif choice < 0.85:
                            r.release_claim(attempt_id, tok, 0)
                            count("release")
                        elif choice < 0.92:
                            r.extend_lease(attempt_id, tok, 1)
                            count("extend")
                        # else: abandoned, for the sweep to find once its lease passes
                    if rnd.random() < 0.3:
                        r.sweep_stale_leases(50)
                        count("sweep")
                    if rnd.random() < 0.5:
                        r.enqueue(f"live-{seed}-{token()}", "a@b.c", "s", text_body="x")
                        count("enqueue")
                except TransientDatabaseError as exc:
                    with lock:
                        client_deadlocks.append(str(exc))
        except BaseException as exc:
            errors.append(exc)
        finally:
            r.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=DURATION + 60)
    print(f"stress ops in {DURATION:.0f}s: {ops}")
    assert not errors, errors
    assert client_deadlocks == []
    assert deadlocks(repo) - server_deadlocks_before == 0
    assert min(ops.values()) > 0, f"every operation must have run: {ops}"
    # Every row is accounted for: nothing lost, UnknownOutcome never claimable.
    total = scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts")
    by_status = sum(s.count for s in repo.outbox_stats())
    assert total == by_status == 400 + ops["enqueue"]
    assert (
        scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts WHERE attempt_count > max_attempts") == 0
    )
    assert (
        scalar(
            repo,
            "SELECT COUNT(*) FROM email_delivery_attempts WHERE status = %s AND claim_token IS NOT NULL",
            (Status.UNKNOWN_OUTCOME.value,),
        )
        == 0
    )
