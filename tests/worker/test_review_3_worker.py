"""The worker against the local SES endpoint (issue 38): a Unicode domain goes to SES in Punycode and
a non-ASCII display name as an RFC 2047 encoded word, as SES requires (it takes 7-bit addresses, no
SMTPUTF8); emails that fail on their own do not hold everyone behind the provider breaker, and an outage
of SendEmail alone (GetAccount answering) still holds the emails without using their attempts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox import Message, enqueue_message
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.helpers import scalar
from tests.support.worker_harness import account, counts, drained, metric, scrape, spawn_worker, wait_until

FAST = {"lease_seconds": 6, "ses_connect_timeout": 1, "ses_read_timeout": 2}


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def test_unicode_domains_go_out_in_punycode_and_unicode_names_encoded(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    whole = enqueue_message(repo.connection, "idn-1", Message(
        to=["Jörg Müller <jorg@exämple.de>"], cc=["ann@bücher.example"], subject="Grüße", text="t",
    )).attempt_id  # fmt: skip
    plain = repo.enqueue("idn-2", "bob@bücher.example", "s", text_body="t").attempt_id
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", **FAST)
    try:
        wait_until(lambda: drained(repo), 60, "both emails to be sent")
    finally:
        assert worker.terminate() == 0, worker.log()[-3000:]
    assert repo.get_row(whole).status is Status.SENT, repo.get_row(whole).last_error_message
    assert repo.get_row(plain).status is Status.SENT
    requests = {m.outbox_id: m.request for m in endpoint.accepted()}
    destination = requests[str(whole)]["Destination"]
    (to,) = destination["ToAddresses"]
    assert to.startswith("=?utf-8?") and to.endswith(" <jorg@xn--exmple-cua.de>"), to
    assert destination["CcAddresses"] == ["ann@xn--bcher-kva.example"]
    assert requests[str(plain)]["Destination"]["ToAddresses"] == ["bob@xn--bcher-kva.example"]
    # The row keeps what the caller wrote; only the wire form is encoded.
    assert repo.get_row(plain).to_address == "bob@bücher.example"


def test_emails_failing_on_their_own_use_their_attempts_and_hold_nobody(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    """Six emails SES answers with a 500 every time, alone in the queue, SES otherwise healthy
    (GetAccount answers): each uses its own attempts at its own backoff and ends Failed; the breaker
    never opens, and an email enqueued meanwhile goes out at once."""
    endpoint.set_faults(FaultRule("error", match="broken", status=500, code="InternalFailure"))
    for i in range(6):
        repo.enqueue(f"broken-{i}", f"broken-{i}@example.com", "s", text_body="x", max_attempts=3)
    worker = spawn_worker(
        dsn, endpoint.url, tmp_path, "w", retry_base_seconds=0.3, retry_max_seconds=1, **FAST
    )
    try:
        wait_until(lambda: scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts WHERE attempt_count >= 2") >= 6,
                   30, "every broken email to fail twice")  # fmt: skip
        late = repo.enqueue("late-good", "good@example.com", "s", text_body="x").attempt_id
        wait_until(lambda: drained(repo), 30, "the broken emails to end and the good one to go")
    finally:
        assert worker.terminate() == 0, worker.log()[-3000:]
    assert repo.get_row(late).status is Status.SENT
    for i in range(6):
        row = repo.get_row_by_notification_id(f"broken-{i}")
        assert (row.status, row.attempt_count, row.last_error_code) == (Status.FAILED, 3, "InternalFailure")
    assert scalar(repo, "SELECT COUNT(*) FROM email_provider_breaker_log WHERE to_state = 'open'") == 0
    assert "failures are the emails' own" in worker.log()


def attempts_by_row(repo: OutboxRepository) -> dict[int, int]:
    cursor = repo.connection.cursor()
    cursor.execute("SELECT id, attempt_count FROM email_delivery_attempts")
    rows = {int(row_id): int(used) for row_id, used in cursor.fetchall()}
    cursor.close()
    return rows


def test_sendemail_down_while_getaccount_answers_holds_the_emails_without_attempts(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    """An outage of SendEmail alone: every send answered 500 while GetAccount answers. 35 emails enqueued
    during it: the breaker opens once `breaker_broad_emails` (20) different emails have failed with none
    accepted between, whatever GetAccount says; the emails held after it opened use no attempt, none
    ends Failed, and once the outage ends every one is Sent exactly once."""
    endpoint.set_faults(FaultRule("error", status=500, code="InternalFailure"))  # no match: every send
    port = free_port()
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", metrics_port=port, concurrency=4,
                          retry_base_seconds=0.3, retry_max_seconds=1, breaker_probe_seconds=1, **FAST)  # fmt: skip

    def probes() -> float:
        return metric(scrape(port), "email_outbox_provider_breaker_events_total", event="probes")

    try:
        worker.wait_healthy()
        for i in range(35):
            repo.enqueue(f"outage-{i}", f"o{i}@example.com", "s", text_body="x")
        wait_until(lambda: repo.breaker_state("ses").state != "closed", 30, "the breaker to open")
        # Probes go a probe interval apart: by the second, every send in flight when it opened has ended.
        wait_until(lambda: probes() >= 2, 30, "two probes")
        at_open = attempts_by_row(repo)
        wait_until(lambda: probes() >= 4, 30, "two more probes")
        assert attempts_by_row(repo) == at_open, "a held email or a failed probe used an attempt"
        assert repo.breaker_state("ses").down, "the breaker stayed open through the outage"
        assert counts(repo)[Status.FAILED] == 0
        endpoint.set_faults()
        wait_until(lambda: repo.breaker_state("ses").state == "closed", 30, "a probe to close the breaker")
        wait_until(lambda: drained(repo), 60, "the emails to be sent")
        samples = scrape(port)
    finally:
        assert worker.terminate() == 0, worker.log()[-3000:]
    result = account(repo, endpoint, 35)
    assert result.by_status[Status.SENT] == 35 and result.duplicates == 0
    # The run was met and SES answered GetAccount, yet the breadth opened the breaker.
    log = worker.log()
    assert "failures are the emails' own" in log
    assert "SendEmail failing for many different emails" in log
    assert metric(samples, "email_outbox_provider_breaker_events_total", event="opened") == 1
    failed_before = {row for row, used in at_open.items() if used > 0}
    held = set(at_open) - failed_before
    print(f"attempts used before the breaker opened: {sum(at_open.values())} by {len(failed_before)} emails")
    assert 0 < len(failed_before) < 20, "only the emails that failed before the twentieth used attempts"
    # After it opened, each email used one attempt: the one that sent it.
    assert attempts_by_row(repo) == {row: used + 1 for row, used in at_open.items()}
    assert held and all(at_open[row] == 0 for row in held)
