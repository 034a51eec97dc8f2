"""Running real worker processes against the local SES endpoint, and the accounting every run ends with."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.ses_endpoint import SesEndpoint
from email_outbox_devtools.worker_process import WorkerProcess
from email_outbox_devtools.worker_process import spawn_worker as start_worker


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def spawn_worker(
    dsn: DatabaseDsn, endpoint_url: str, log_dir: Path, name: str, **flags: object
) -> WorkerProcess:
    """A worker process (email_outbox_devtools.worker_process) polling every 0.2 s unless told otherwise."""
    return start_worker(dsn, endpoint_url, log_dir, name, env={"EMAIL_OUTBOX_POLL_INTERVAL": "0.2"}, **flags)


def counts(repo: OutboxRepository) -> dict[Status, int]:
    return {s.status: s.count for s in repo.outbox_stats()}


def drained(repo: OutboxRepository) -> bool:
    c = counts(repo)
    return c[Status.PENDING] + c[Status.RETRYING] + c[Status.PROCESSING] == 0


@dataclass
class Accounting:
    by_status: dict[Status, int]
    accepted_total: int
    duplicates: int
    unknown_accepted: int
    unknown_never_accepted: int

    def __str__(self) -> str:
        statuses = ", ".join(f"{s.value}={n}" for s, n in self.by_status.items() if n)
        return (
            f"{statuses}; endpoint accepted {self.accepted_total}, duplicates {self.duplicates},"
            f" UnknownOutcome accepted/never {self.unknown_accepted}/{self.unknown_never_accepted}"
        )


def account(repo: OutboxRepository, endpoint: SesEndpoint, expected_rows: int) -> Accounting:
    """The full accounting: no row lost, none in flight, sends == Sent + accepted UnknownOutcome, no duplicates."""
    by_status = counts(repo)
    assert sum(by_status.values()) == expected_rows, f"rows lost or invented: {by_status}"
    assert by_status[Status.PROCESSING] == 0, "a row is still claimed after the run"
    accepted = endpoint.accepted_counts()
    duplicates = sum(1 for n in accepted.values() if n > 1)
    rows = {
        s: {r.id for r in repo.list_rows(s, limit=1_000_000)} for s in (Status.SENT, Status.UNKNOWN_OUTCOME)
    }
    sent_ids = {str(i) for i in rows[Status.SENT]}
    unknown_ids = {str(i) for i in rows[Status.UNKNOWN_OUTCOME]}
    unknown_accepted = len(unknown_ids & set(accepted))
    assert sent_ids <= set(accepted), "a row is Sent that the endpoint never accepted"
    assert set(accepted) <= sent_ids | unknown_ids, (
        "the endpoint accepted a row that is neither Sent nor Unknown"
    )
    assert sum(accepted.values()) == len(sent_ids) + unknown_accepted
    assert duplicates == 0, "an email was sent twice"
    result = Accounting(
        by_status, sum(accepted.values()), duplicates, unknown_accepted, len(unknown_ids) - unknown_accepted
    )
    print(f"accounting: {result}")
    return result


# --- the worker's /metrics and /healthz -----------------------------------------------------------
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def health(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            json.loads(response.read())
            return int(response.status)
    except urllib.error.HTTPError as exc:
        json.loads(exc.read())
        return int(exc.code)
    except OSError:
        return 0


def metric(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
