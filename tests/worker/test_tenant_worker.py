"""Tenants with a real worker against the local SES endpoint (issue 37): every send of a tenant with an
SES tenant name carries TenantName; a SendingPausedException on a tenant's send pauses that tenant
only (its rows wait, no attempt used, no Failed row, the breaker stays closed, the other tenants go
on); GetTenant's DISABLED pauses a tenant and ENABLED lifts that pause."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.support.helpers import scalar
from tests.support.worker_harness import metric, scrape, spawn_worker, wait_until

FAST = {"concurrency": 2, "lease_seconds": 6, "ses_connect_timeout": 1, "ses_read_timeout": 2}


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def enqueue(repo: OutboxRepository, tenant: str, n: int) -> None:
    for i in range(n):
        message = {"to": [f"{tenant}{i}@example.com"], "subject": "s", "text": "t", "tenant": tenant}
        repo.enqueue_message(f"{tenant}-{i}", json.dumps(message))


def status_of(repo: OutboxRepository, tenant: str) -> dict[str, int]:
    rows = repo.list_rows(Status.PENDING, tenant=tenant, limit=1000)
    sent = repo.list_rows(Status.SENT, tenant=tenant, limit=1000)
    return {"Pending": len(rows), "Sent": len(sent)}


def test_a_tenant_ses_paused_waits_while_the_others_send(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    repo.tenant_add("news", {"accounts": ["*"], "ses_tenant_name": "ses-news"}, "ops", "newsletter")
    repo.tenant_add("codes", {"accounts": ["*"], "ses_tenant_name": "ses-codes"}, "ops", "one-time codes")
    endpoint.set_tenant("ses-news", "ENABLED", sending_paused=True)
    endpoint.set_tenant("ses-codes", "ENABLED")
    enqueue(repo, "news", 5)
    enqueue(repo, "codes", 10)
    port = free_port()
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", metrics_port=port, stats_interval=0.2, **FAST)
    try:
        wait_until(lambda: status_of(repo, "codes")["Sent"] == 10, 60, "codes' ten emails sent")
        assert {m.tenant_name for m in endpoint.accepted()} == {"ses-codes"}, "every send carries TenantName"
        (news,) = [t for t in repo.tenants() if t.name == "news"]
        assert news.paused_reason == "ses-sending-paused"
        # the rows it had reserved or was sending come back unsent
        wait_until(
            lambda: status_of(repo, "news") == {"Pending": 5, "Sent": 0}, 30, "news' rows back, unsent"
        )
        assert (
            scalar(
                repo,
                "SELECT MAX(attempt_count) FROM email_delivery_attempts WHERE notification_id LIKE 'news-%'",
            )
            == 0
        )
        assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts WHERE status = 'Failed'") == 0
        assert repo.breaker_state("ses").state == "closed", "a tenant's pause is not the provider's outage"
        # /metrics per tenant, labelled with the operators' names
        wait_until(
            lambda: (
                metric(scrape(port), "email_outbox_tenant_paused", tenant="news", reason="ses-sending-paused")
                == 1
            ),
            10,
            "the tenant's pause in /metrics",
        )
        wait_until(
            lambda: metric(scrape(port), "email_outbox_tenant_due_rows", tenant="news") == 5,
            10,
            "news' due rows",
        )
        samples = scrape(port)
        assert metric(samples, "email_outbox_tenant_sends_total", tenant="codes", outcome="accepted") == 10
        assert metric(samples, "email_outbox_tenant_sends_total", tenant="news", outcome="tenant_paused") >= 1
        assert metric(samples, "email_outbox_tenant_paused", tenant="codes", reason="ses-sending-paused") == 0
        # SES lifts the pause: the next GetTenant read lifts the tenant's pause. Its turn is made due now
        # (a fixture, like making rows due) rather than waited for.
        endpoint.set_tenant("ses-news", "ENABLED", sending_paused=False)
        cursor = repo.connection.cursor()
        cursor.execute("UPDATE email_tenants SET ses_check_taken_at = NULL")
        cursor.close()
        repo.connection.commit()
        wait_until(lambda: status_of(repo, "news")["Sent"] == 5, 60, "news sent after SES enabled it")
    finally:
        assert worker.terminate() == 0


def test_get_tenant_disabled_pauses_the_tenant(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    repo.tenant_add("risky", {"accounts": ["*"], "ses_tenant_name": "ses-risky"}, "ops", "why")
    endpoint.set_tenant("ses-risky", "DISABLED")
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", **FAST)
    try:
        wait_until(
            lambda: [t.paused_reason for t in repo.tenants() if t.name == "risky"] == ["ses-disabled"],
            30,
            "the GetTenant read to pause the tenant",
        )
        enqueue(repo, "risky", 2)
        enqueue(repo, "default", 0)
        repo.enqueue_message("plain", json.dumps({"to": ["p@example.com"], "subject": "s", "text": "t"}))
        wait_until(lambda: status_of(repo, "default")["Sent"] == 1, 30, "the default tenant's email sent")
        assert status_of(repo, "risky") == {"Pending": 2, "Sent": 0}
        assert endpoint.state.requests == 1, "the paused tenant's rows were never sent"
    finally:
        assert worker.terminate() == 0
