"""Every metric the shipped alerting rules (deploy/prometheus/) and the Grafana dashboard
(deploy/grafana/) query exists in the /metrics of a real running worker and a real running events
consumer (the tenants' metrics among them), and both answer /readyz."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.support.helpers import enqueue_many
from tests.support.history import record_event
from tests.support.worker_harness import drained, spawn_worker, wait_until

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
METRIC = re.compile(r"\bemail_outbox_[a-z0-9_]+")


def queried_metrics() -> set[str]:
    rules = (DEPLOY / "prometheus" / "email-outbox-alerts.yml").read_text()
    expressions = [line.split("expr:", 1)[1] for line in rules.splitlines() if "expr:" in line]
    dashboard = json.loads((DEPLOY / "grafana" / "email-outbox.json").read_text())
    expressions += [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    return {name for expression in expressions for name in METRIC.findall(expression)}


def exported(port: int) -> set[str]:
    """Every name a query may use: each sample's, and a gauge's, a counter's `_total` and a
    histogram's series even before their first sample (a labelled family with no label seen yet)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    names = set()
    for family in text_string_to_metric_families(text):
        names |= {sample.name for sample in family.samples}
        if family.type == "gauge":
            names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names |= {family.name + suffix for suffix in ("_bucket", "_sum", "_count")}
    return names


def readyz(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def test_every_metric_the_alerts_and_the_dashboard_query_is_exported(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path
) -> None:
    queried = queried_metrics()
    assert len(queried) > 25, queried
    enqueue_many(repo, 5, prefix="deploy")
    repo.enqueue("deploy-reject", "reject-1@example.com", "s", text_body="x")
    with SesEndpoint() as endpoint:
        worker_port = free_port()
        worker = spawn_worker(
            dsn, endpoint.url, tmp_path, "deploy", metrics_port=worker_port, stats_interval=0.2
        )
        consumer = None
        try:
            wait_until(lambda: drained(repo), 60, "the outbox to drain")
            # SES's events for one sent row, so the consumer's 24-hour rates have something to divide.
            sent = next(row for row in repo.list_rows(Status.SENT, limit=1))
            now = datetime.now(UTC).replace(tzinfo=None)
            for event, kind in (("Send", None), ("Bounce", "Permanent"), ("Complaint", None)):
                record_event(repo, event, sent.provider_message_id or "", sent.id, sent.to_address, now, kind)
            events_port = free_port()
            # The real command, reading its events from stdin until it closes: its metrics are served
            # as the SQS consumer's are (email_outbox.events.metrics.serve).
            consumer = subprocess.Popen(
                [sys.executable, "-m", "email_outbox.cli", "events", "--from-file", "-", "--dsn", dsn.url(),
                 "--metrics-port", str(events_port)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            wait_until(lambda: readyz(events_port) == 200, 30, "the events consumer to be ready")
            wait_until(lambda: readyz(worker_port) == 200, 30, "the worker to be ready")
            wait_until(
                lambda: "email_outbox_retention_last_finished_timestamp_seconds" in exported(worker_port),
                30,
                "the queue gauges",
            )
            found = exported(worker_port) | exported(events_port)
        finally:
            if consumer is not None:
                consumer.communicate(b"", timeout=60)
            assert worker.terminate() == 0
    assert queried - found == set(), "queried but not exported"
