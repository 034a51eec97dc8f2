"""Running real worker processes against the local SES endpoint, and the accounting every run ends with."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from email_outbox.devtools.ses_endpoint import SesEndpoint
from email_outbox.dsn import DatabaseDsn
from email_outbox.models import Status
from email_outbox.repository import OutboxRepository
from prometheus_client.parser import text_string_to_metric_families


def wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)


def spawn_worker(
    dsn: DatabaseDsn, endpoint_url: str, log_dir: Path, name: str, **flags: object
) -> WorkerProcess:
    env = {
        **os.environ,
        "EMAIL_OUTBOX_DSN": dsn.url(),
        "EMAIL_OUTBOX_DEFAULT_FROM": "shop@example.com",
        "AWS_ENDPOINT_URL_SESV2": endpoint_url,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "EMAIL_OUTBOX_POLL_INTERVAL": "0.2",
    }
    args = [sys.executable, "-m", "email_outbox.cli", "worker", "--worker-id", name]
    for key, value in flags.items():
        if value is True:
            args.append("--" + key.replace("_", "-"))
        else:
            args += ["--" + key.replace("_", "-"), str(value)]
    log_path = log_dir / f"{name}.log"
    proc = subprocess.Popen(args, env=env, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    return WorkerProcess(proc, log_path)


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
