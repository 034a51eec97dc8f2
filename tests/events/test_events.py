"""SES events recorded once, UnknownOutcome settled from evidence, the suppression list.

The contract tests call the procedures through the repository and the ingestor; the end-to-end tests
(tests/events/test_events_e2e.py) run the worker, the local SES endpoint and moto's SNS and SQS.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput
from email_outbox.events import Ingestor, MalformedMessage, events_of, records_in
from email_outbox.models import Status
from email_outbox_devtools.ses_events import eventbridge_event, record, sns_notification
from tests.conftest import db_now
from tests.support.helpers import scalar, token

CONSUMER = "events-test"


def unknown_row(repo: OutboxRepository, n: str, to: str = "ann@example.com") -> int:
    """A row whose send ended ambiguously."""
    attempt_id = repo.enqueue(n, to, "s", text_body="t").attempt_id
    t = token()
    assert repo.try_claim(attempt_id, t, "w1", 60) == 1
    assert repo.finalize_unknown(attempt_id, t, "read timeout") == 1
    return attempt_id


def sent_row(repo: OutboxRepository, n: str, message_id: str, to: str = "bob@example.com") -> int:
    attempt_id = repo.enqueue(n, to, "s", text_body="t").attempt_id
    t = token()
    assert repo.try_claim(attempt_id, t, "w1", 60) == 1
    assert repo.finalize_sent(attempt_id, t, message_id) == 1
    return attempt_id


def ingest(repo: OutboxRepository, *records: dict[str, object]) -> Ingestor:
    ingestor = Ingestor(repo, CONSUMER)
    assert all(ingestor.ingest([json.dumps(r) for r in records]))
    return ingestor


# --- envelopes and records -------------------------------------------------------------------------
def test_every_envelope_yields_the_same_record() -> None:
    rec = record("Delivery", "m-1", "ann@example.com", "7", datetime(2026, 12, 1, 10, 0, 0))
    for envelope in (rec, sns_notification(rec), eventbridge_event(rec)):
        (found,) = records_in(json.dumps(envelope))
        assert found == rec
    assert records_in(json.dumps({"Type": "SubscriptionConfirmation", "Message": "x"})) == []
    for bad in ("not json", "[1, 2]", json.dumps({"hello": 1}), json.dumps({"eventType": "Send"})):
        with pytest.raises(MalformedMessage):
            records_in(bad)


def test_documented_records_become_the_procedures_fields() -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    (bounce,) = events_of(record("Bounce", "m-1", "ann@example.com", "7", at, bounce_subtype="General"))
    assert (bounce.event_type, bounce.kind, bounce.subkind) == ("Bounce", "Permanent", "General")
    assert bounce.recipient == "ann@example.com" and bounce.outbox_id == "7"
    assert bounce.event_at == at + timedelta(seconds=1)
    assert "550 5.1.1" in (bounce.detail or "")
    (send,) = events_of(record("Send", "m-1", "ann@example.com", "7", at))
    assert send.event_at == at and send.recipient == "ann@example.com"
    (failure,) = events_of(record("Rendering Failure", "m-1", "ann@example.com", None, at))
    assert failure.event_type == "RenderingFailure" and failure.outbox_id is None
    (delay,) = events_of(record("DeliveryDelay", "m-1", "ann@example.com", "7", at))
    assert delay.kind == "TransientCommunicationFailure"
    (complaint,) = events_of(record("Complaint", "m-1", "ann@example.com", "7", at))
    assert complaint.kind == "abuse"


# --- recorded once ---------------------------------------------------------------------------------
def test_evidence_resolves_unknown_outcome_to_sent_with_an_audit_event_naming_it(
    repo: OutboxRepository,
) -> None:
    attempt_id = unknown_row(repo, "u-1")
    at = datetime(2026, 12, 1, 10, 0, 0)
    ingestor = ingest(repo, record("Delivery", "ses-111", "ann@example.com", str(attempt_id), at))
    history = len(repo.events(attempt_id))
    row = repo.get_row(attempt_id)
    assert row.status is Status.SENT and row.provider_message_id == "ses-111"
    last = repo.events(attempt_id)[-1]
    assert (last.from_status, last.to_status, last.actor) == (Status.UNKNOWN_OUTCOME, Status.SENT, CONSUMER)
    assert "Delivery event" in (last.detail or "") and "ses-111" in (last.detail or "")
    assert "2026-12-01T10:00:01" in (last.detail or "")
    assert ingestor.tally.resolved["Sent"] == 1
    # Redelivered and replayed: nothing changes.
    again = ingest(repo, record("Delivery", "ses-111", "ann@example.com", str(attempt_id), at))
    assert again.tally.duplicates == 1 and again.tally.recorded == 0
    assert len(repo.events(attempt_id)) == history
    assert scalar(repo, "SELECT COUNT(*) FROM email_provider_events") == 1


def test_reject_and_rendering_failure_resolve_to_failed(repo: OutboxRepository) -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    a = unknown_row(repo, "u-a")
    b = unknown_row(repo, "u-b")
    ingest(
        repo,
        record("Reject", "ses-a", "ann@example.com", str(a), at),
        record("Rendering Failure", "ses-b", "ann@example.com", str(b), at),
    )
    assert repo.get_row(a).status is Status.FAILED and repo.get_row(a).last_error_code == "SesReject"
    assert repo.get_row(b).status is Status.FAILED and repo.get_row(a).provider_message_id is None


def test_mail_this_outbox_did_not_send_is_counted_and_skipped(repo: OutboxRepository) -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    other = repo.enqueue("o-1", "carol@example.com", "s", text_body="t").attempt_id
    ingestor = ingest(
        repo,
        record("Delivery", "foreign-1", "x@example.org", None, at),
        # Another outbox's tag (the same number, another recipient): not ours either.
        record("Delivery", "foreign-2", "x@example.org", str(other), at),
        record("Open", "foreign-3", "x@example.org", None, at),
    )
    assert ingestor.tally.unmatched == 2 and ingestor.tally.skipped == 1 and ingestor.tally.recorded == 0
    assert scalar(repo, "SELECT COUNT(*) FROM email_provider_events") == 0


def test_arrival_order_does_not_matter_for_the_latest_provider_state(repo: OutboxRepository) -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    a = sent_row(repo, "o-a", "ses-a", "a@example.com")
    b = sent_row(repo, "o-b", "ses-b", "b@example.com")
    send_a, delivery_a = (
        record(t, "ses-a", "a@example.com", str(a), at, after=s) for t, s in (("Send", 0), ("Delivery", 2))
    )
    ingest(repo, delivery_a)
    ingest(repo, send_a)
    ingest(repo, record("Send", "ses-b", "b@example.com", str(b), at, after=0))
    ingest(repo, record("Delivery", "ses-b", "b@example.com", str(b), at, after=2))
    # A bounce after the delivery (a later asynchronous bounce) wins, in either order of arrival.
    ingest(
        repo,
        record(
            "Bounce",
            "ses-b",
            "b@example.com",
            str(b),
            at,
            after=60,
            bounce_type="Transient",
            bounce_subtype="MailboxFull",
        ),
    )
    state_a, state_b = repo.provider_state(a), repo.provider_state(b)
    assert state_a is not None and state_a.state == "delivered" and state_a.event_count == 2
    assert state_b is not None and (state_b.state, state_b.kind, state_b.subkind) == (
        "bounced",
        "Transient",
        "MailboxFull",
    )
    assert repo.get_row(b).status is Status.SENT, "the outbox status stays Sent"
    assert repo.suppressed_addresses() == [], "a transient bounce does not suppress"
    assert [e.event_type for e in repo.provider_events(b)] == ["Send", "Delivery", "Bounce"]


def test_messageid_decides_when_the_tag_disagrees(repo: OutboxRepository) -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    first = sent_row(repo, "o-1", "ses-first", "dan@example.com")
    second = unknown_row(repo, "o-2", "dan@example.com")
    # The tag says `second`, the MessageId is `first`'s: recorded for `first`, `second` untouched.
    ingest(repo, record("Delivery", "ses-first", "dan@example.com", str(second), at))
    assert repo.get_row(second).status is Status.UNKNOWN_OUTCOME
    (event,) = repo.provider_events(first)
    assert "the MessageId decides" in (event.match_note or "")


def test_requeued_row_sent_twice_keeps_its_first_message_id_and_says_so(repo: OutboxRepository) -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    attempt_id = unknown_row(repo, "twice", "eve@example.com")
    # Requeued by an operator, and ambiguous again: SES may have accepted both sends.
    assert repo.requeue_unknown_outcome(attempt_id, "alice", "no Send event yet") == 1
    t = token()
    assert repo.try_claim(attempt_id, t, "w1", 60) == 1
    assert repo.finalize_unknown(attempt_id, t, "read timeout again") == 1
    ingest(repo, record("Send", "ses-1", "eve@example.com", str(attempt_id), at))
    assert "requeued after an earlier UnknownOutcome" in (repo.events(attempt_id)[-1].detail or "")
    ingest(repo, record("Send", "ses-2", "eve@example.com", str(attempt_id), at, after=30))
    assert repo.get_row(attempt_id).provider_message_id == "ses-1"
    notes = [e.match_note or "" for e in repo.provider_events(attempt_id)]
    assert "more than once" in notes[-1]


def test_evidence_recorded_while_processing_settles_the_row_once_it_is_unknown(
    repo: OutboxRepository,
) -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    attempt_id = repo.enqueue("late", "fay@example.com", "s", text_body="t").attempt_id
    t = token()
    assert repo.try_claim(attempt_id, t, "w1", 60) == 1
    ingest(repo, record("Send", "ses-late", "fay@example.com", str(attempt_id), at))
    assert repo.get_row(attempt_id).status is Status.PROCESSING
    assert repo.finalize_unknown(attempt_id, t, "read timeout") == 1
    assert repo.resolve_unknown_from_evidence(100, CONSUMER) == 1
    assert repo.get_row(attempt_id).status is Status.SENT
    assert repo.resolve_unknown_from_evidence(100, CONSUMER) == 0


def test_a_row_without_evidence_stays_unknown_and_status_counts_it(
    repo: OutboxRepository, dsn: object, capsys: pytest.CaptureFixture[str]
) -> None:
    unknown_row(repo, "silent")
    assert repo.resolve_unknown_from_evidence(100, CONSUMER) == 0
    assert repo.provider_stats(86400, 0).unknown_without_evidence == 1
    assert repo.provider_stats(86400, 3600).unknown_without_evidence == 0


def test_procedure_refuses_bad_input_by_name(repo: OutboxRepository) -> None:
    now = db_now(repo)
    cases = [
        ({"event_type": "Open"}, "event_type"),
        ({"ses_message_id": ""}, "ses_message_id"),
        ({"recipient": "a\nb@example.com"}, "recipient"),
        ({"recorded_by": " "}, "recorded_by"),
    ]
    for override, field in cases:
        args: dict[str, object] = {
            "event_type": "Send", "ses_message_id": "m", "outbox_id": None, "recipient": None,
            "event_at": now, "kind": None, "subkind": None, "detail": None, "recorded_by": CONSUMER,
        }  # fmt: skip
        args.update(override)
        with pytest.raises(InvalidInput, match=field):
            repo.record_provider_event(**args)  # type: ignore[arg-type]


# --- suppression -----------------------------------------------------------------------------------
def test_permanent_bounce_suppresses_and_a_later_email_is_never_claimed(repo: OutboxRepository) -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    attempt_id = sent_row(repo, "b-1", "ses-b1", "Gone@Example.COM")
    waiting = repo.enqueue("b-waiting", "Gone@example.com", "s", text_body="t").attempt_id
    ingestor = ingest(repo, record("Bounce", "ses-b1", "Gone@Example.COM", str(attempt_id), at))
    assert ingestor.tally.suppressed == 1
    (entry,) = repo.suppressed_addresses()
    assert entry.reason == "bounce" and "Permanent General" in entry.detail and entry.attempt_id == attempt_id
    # A new email to the same address, the domain in another case: Failed at once, never claimable.
    later = repo.enqueue("b-2", "Gone@EXAMPLE.com", "s", text_body="t").attempt_id
    row = repo.get_row(later)
    assert row.status is Status.FAILED and row.last_error_code == "Suppressed" and row.attempt_count == 0
    # The local part is compared exactly: another mailbox.
    assert (
        repo.get_row(repo.enqueue("b-3", "gone@example.com", "s", text_body="t").attempt_id).status
        is Status.PENDING
    )
    # A row enqueued before the bounce is failed by the claim instead of being handed out.
    claimed = repo.claim_batch_bounded(token(), "w1", 60, 10, 1 << 20)
    assert {c.id for c in claimed} == {repo.get_row_by_notification_id("b-3").id}
    assert repo.get_row(waiting).status is Status.FAILED
    history = repo.events(waiting)
    assert (history[-1].from_status, history[-1].to_status) == (Status.PENDING, Status.FAILED)
    assert "suppression list" in (history[-1].detail or "")


def test_per_row_claim_and_complaints_and_on_account_suppression(repo: OutboxRepository) -> None:
    at = datetime(2026, 12, 1, 10, 0, 0)
    a = sent_row(repo, "c-1", "ses-c1", "hal@example.com")
    b = sent_row(repo, "c-2", "ses-c2", "ida@example.com")
    waiting = repo.enqueue("c-3", "hal@example.com", "s", text_body="t").attempt_id
    ingest(
        repo,
        record("Complaint", "ses-c1", "hal@example.com", str(a), at),
        record("Bounce", "ses-c2", "ida@example.com", str(b), at, bounce_subtype="OnAccountSuppressionList"),
    )
    assert {s.address for s in repo.suppressed_addresses()} == {"hal@example.com", "ida@example.com"}
    assert repo.try_claim(waiting, token(), "w1", 60) == 0
    assert repo.get_row(waiting).status is Status.FAILED


def test_suppression_commands_are_audited(
    repo: OutboxRepository, dsn: object, capsys: pytest.CaptureFixture[str]
) -> None:
    url = dsn.url()  # type: ignore[attr-defined]
    add = [
        "suppression",
        "add",
        "Kim@Example.com",
        "--by",
        "alice",
        "--reason",
        "asked us to stop",
        "--dsn",
        url,
    ]
    assert main(add) == 0
    assert main(add) == 1
    assert main(["suppression", "list", "--dsn", url]) == 0
    assert "Kim@Example.com" in capsys.readouterr().out
    assert (
        repo.get_row(repo.enqueue("k-1", "Kim@example.COM", "s", text_body="t").attempt_id).status
        is Status.FAILED
    )
    assert (
        main(["suppression", "remove", "kim@example.com", "--by", "bob", "--reason", "x", "--dsn", url]) == 1
    )
    assert (
        main(["suppression", "remove", "Kim@EXAMPLE.com", "--by", "bob", "--reason", "fixed", "--dsn", url])
        == 0
    )
    assert (
        repo.get_row(repo.enqueue("k-2", "Kim@example.com", "s", text_body="t").attempt_id).status
        is Status.PENDING
    )
    log = scalar(
        repo,
        "SELECT GROUP_CONCAT(CONCAT(action, ':', actor) ORDER BY id) FROM email_suppressed_addresses_log",
    )
    assert log == "add:alice,remove:bob"


def test_rates_of_the_last_24_hours(repo: OutboxRepository) -> None:
    now = db_now(repo)
    records = []
    for i in range(20):
        attempt_id = sent_row(repo, f"r-{i}", f"ses-r{i}", f"r{i}@example.com")
        records.append(
            record("Send", f"ses-r{i}", f"r{i}@example.com", str(attempt_id), now - timedelta(minutes=5))
        )
        if i < 2:
            records.append(
                record(
                    "Bounce", f"ses-r{i}", f"r{i}@example.com", str(attempt_id), now - timedelta(minutes=5)
                )
            )
        if i == 2:
            records.append(
                record(
                    "Complaint", f"ses-r{i}", f"r{i}@example.com", str(attempt_id), now - timedelta(minutes=5)
                )
            )
    ingest(repo, *records)
    stats = repo.provider_stats(86400, 900)
    assert (stats.sends, stats.permanent_bounces, stats.complaints) == (20, 2, 1)
    assert stats.bounce_rate == pytest.approx(0.1) and stats.complaint_rate == pytest.approx(0.05)
    assert stats.suppressed_addresses == 3


def test_from_file_reads_every_shape_and_show_and_status_print_the_figures(
    repo: OutboxRepository, dsn: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = dsn.url()  # type: ignore[attr-defined]
    at = db_now(repo) - timedelta(minutes=1)
    a = unknown_row(repo, "f-1", "jo@example.com")
    lines = [
        json.dumps(sns_notification(record("Send", "ses-f1", "jo@example.com", str(a), at))),
        json.dumps(eventbridge_event(record("Delivery", "ses-f1", "jo@example.com", str(a), at))),
        "this line is not JSON",
        json.dumps(record("Delivery", "ses-f1", "jo@example.com", str(a), at)),
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["events", "--from-file", str(path), "--dsn", url]) == 1  # one malformed line
    out = capsys.readouterr().out
    assert "events recorded 2, duplicates 1" in out and "malformed 1" in out
    assert repo.get_row(a).status is Status.SENT
    assert main(["show", str(a), "--dsn", url]) == 0
    out = capsys.readouterr().out
    assert "provider state:  delivered" in out and "ses-f1" in out
    assert main(["status", "--dsn", url]) == 0
    out = capsys.readouterr().out
    assert "bounce rate (24h)" in out and "complaint rate (24h)" in out
    array = tmp_path / "events.json"
    array.write_text(json.dumps([record("Send", "ses-f1", "jo@example.com", str(a), at)]))
    assert main(["events", "--from-file", str(array), "--dsn", url]) == 0
    assert "duplicates 1" in capsys.readouterr().out


def test_the_events_role_records_events_and_nothing_else(
    server: object, dsn: object, repo: OutboxRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    from email_outbox.db.dsn import DatabaseDsn
    from email_outbox.errors import AccessDenied

    base: DatabaseDsn = dsn  # type: ignore[assignment]
    user = f"eo_events_{token()[:8]}"
    monkeypatch.setenv("EVENTS_ROLE_PASSWORD", "Ev3nts-pass")
    assert (
        main(
            [
                "grant",
                "events",
                f"{user}@%",
                "--dsn",
                base.url(),
                "--create",
                "--password-env",
                "EVENTS_ROLE_PASSWORD",
            ]
        )
        == 0
    )
    events_repo = OutboxRepository.open(
        DatabaseDsn(user, "Ev3nts-pass", base.host, base.port, base.database, base.unix_socket)
    )
    try:
        attempt_id = unknown_row(repo, "role-1")
        at = db_now(repo) - timedelta(minutes=1)
        done = Ingestor(events_repo, "ev").ingest(
            [json.dumps(record("Send", "ses-role", "ann@example.com", str(attempt_id), at))]
        )
        assert done == [True] and repo.get_row(attempt_id).status is Status.SENT
        assert events_repo.provider_stats(86400, 900).sends == 1
        with pytest.raises(AccessDenied):
            events_repo.claim_batch(token(), "ev", 60, 1)
        with pytest.raises(AccessDenied):
            events_repo.get_row(attempt_id)
        with pytest.raises(AccessDenied):
            events_repo.suppression_remove("ann@example.com", "ev", "no")
    finally:
        events_repo.close()
        conn = server.admin_connection()  # type: ignore[attr-defined]
        conn.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
        conn.close()


def test_the_consumers_metrics_show_events_by_type_and_both_rates(repo: OutboxRepository) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from email_outbox.events.metrics import EventsCollector

    now = db_now(repo)
    attempt_id = sent_row(repo, "met-1", "ses-met", "met@example.com")
    ingestor = ingest(
        repo,
        record("Send", "ses-met", "met@example.com", str(attempt_id), now - timedelta(minutes=2)),
        record("Bounce", "ses-met", "met@example.com", str(attempt_id), now - timedelta(minutes=2)),
    )
    collector = EventsCollector(ingestor.tally)
    collector.stats = repo.provider_stats(86400, 900)
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    assert 'email_outbox_provider_events_total{type="Bounce"} 1.0' in text
    assert 'email_outbox_provider_event_outcomes_total{outcome="recorded"} 2.0' in text
    assert "email_outbox_bounce_rate_24h 1.0" in text and "email_outbox_complaint_rate_24h 0.0" in text


def test_from_stdin_replays_a_firehose_style_stream(
    repo: OutboxRepository, dsn: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    at = db_now(repo) - timedelta(minutes=1)
    a = unknown_row(repo, "stdin-1", "lu@example.com")
    # Firehose objects: records one after another, not always one per line.
    stream = json.dumps(record("Send", "ses-s1", "lu@example.com", str(a), at)) + json.dumps(
        record("Delivery", "ses-s1", "lu@example.com", str(a), at)
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(stream + "\n"))
    assert main(["events", "--from-file", "-", "--dsn", dsn.url()]) == 0  # type: ignore[attr-defined]
    assert "events recorded 2" in capsys.readouterr().out
    assert repo.get_row(a).status is Status.SENT and repo.get_row(a).provider_message_id == "ses-s1"


def test_the_consumers_metrics_bind_loopback_unless_told(dsn: DatabaseDsn) -> None:
    """prometheus_client binds every interface by default; the consumer, like the worker, does not."""
    import threading
    import urllib.request

    from email_outbox.cli.main import build_parser
    from email_outbox.events.ingest import Tally
    from email_outbox.events.metrics import serve
    from email_outbox_devtools.dbserver import free_port

    args = build_parser().parse_args(["events", "--from-file", "-", "--metrics-port", "9"])
    assert args.metrics_host == "127.0.0.1"
    port, stop = free_port(), threading.Event()
    # A connection of the refresh thread's own, as the command gives it: that thread closes it.
    serve(args.metrics_host, port, Tally(), lambda: OutboxRepository.open(dsn), stop)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.status == 200
        listening = [line.split()[1] for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
                     if line.split()[3] == "0A"]  # fmt: skip
        assert f"0100007F:{port:04X}" in listening and f"00000000:{port:04X}" not in listening
    finally:
        stop.set()


def test_an_event_with_no_recipient_cannot_settle_or_suppress_through_the_tag(repo: OutboxRepository) -> None:
    """The tag counts only for a row to the event's recipient; an event naming none (a forged or
    broken record) used to skip that check and could suppress or settle any row by its id."""
    row = unknown_row(repo, "o-norecipient", "zoe@example.com")
    for event_type, kind in (("Bounce", "Permanent"), ("Reject", None)):
        result = repo.record_provider_event(
            event_type=event_type, ses_message_id=f"ses-forged-{event_type}", outbox_id=str(row),
            recipient=None, event_at=datetime(2026, 12, 1, 10, 0, 0), kind=kind, subkind=None,
            detail=None, recorded_by="test",
        )  # fmt: skip
        assert (result.outcome, result.attempt_id, result.resolved, result.suppressed) == (
            "unmatched",
            None,
            None,
            0,
        )
    assert repo.get_row(row).status is Status.UNKNOWN_OUTCOME
    assert repo.suppressed_addresses() == []


def test_the_consumer_receives_nothing_while_the_database_does_not_answer() -> None:
    """Every receive counts toward the queue's maxReceiveCount: polling through an outage would move
    the waiting events to the dead-letter queue unrecorded."""
    import threading

    from email_outbox.errors import DatabaseUnavailable
    from email_outbox.events.sqs import SqsConsumer, SqsOptions

    class CountingSqs:
        receives = 0

        def receive_message(self, **_: object) -> dict[str, object]:
            self.receives += 1
            return {"Messages": []}

    def database_down() -> OutboxRepository:
        raise DatabaseUnavailable("connection refused")

    sqs = CountingSqs()
    consumer = SqsConsumer(
        database_down, "c", SqsOptions("https://sqs.invalid/q"), threading.Event(), client=sqs
    )
    for _ in range(3):
        with pytest.raises(DatabaseUnavailable):
            consumer.run_once()
    assert sqs.receives == 0


def test_a_record_with_a_lone_surrogate_is_malformed_and_its_neighbours_are_recorded(
    repo: OutboxRepository,
) -> None:
    """A JSON escape such as \\ud800 makes text no database column takes: it used to fail the whole
    batch (or crash the consumer), again on every redelivery, until its neighbours went to the DLQ."""
    at = datetime(2026, 12, 1, 10, 0, 0)
    row = unknown_row(repo, "o-surrogate", "una@example.com")
    poison = json.dumps(record("Delivery", "ses-poison", "una@example.com", str(row), at)).replace(
        "ses-poison", "ses-\\ud800"
    )
    good = json.dumps(record("Delivery", "ses-good", "una@example.com", str(row), at))
    assert Ingestor(repo, CONSUMER).ingest([poison, good]) == [False, True]
    assert repo.get_row(row).status is Status.SENT
    # What SES sends a topic when it becomes an event destination carries no mail: nothing to record.
    assert (
        records_in(json.dumps({"notificationType": "AmazonSnsSubscriptionSucceeded", "message": "x"})) == []
    )


def test_send_and_reject_of_one_message_in_one_batch_settle_as_they_would_one_by_one(
    repo: OutboxRepository,
) -> None:
    """SES sends Send, then Reject (a virus found after acceptance). One by one the Send settles the
    row as Sent, and so does the late resolver; a batch used to sort Reject first and settle Failed."""
    at = datetime(2026, 12, 1, 10, 0, 0)
    row = unknown_row(repo, "o-send-reject", "vic@example.com")
    reject = record("Reject", "ses-sr", "vic@example.com", str(row), at + timedelta(seconds=1))
    send = record("Send", "ses-sr", "vic@example.com", str(row), at)
    assert Ingestor(repo, CONSUMER).ingest([json.dumps(reject), json.dumps(send)]) == [True, True]
    assert repo.get_row(row).status is Status.SENT


def message_row(repo: OutboxRepository, nid: str, then: str | None = None, **recipients: list[str]) -> int:
    """A whole message to `recipients` (to, cc, bcc); `then` "unknown" or "sent" takes it there."""
    from email_outbox import Message, enqueue_message

    attempt_id = enqueue_message(
        repo.connection, nid, Message(subject="s", text="t", **recipients)
    ).attempt_id
    repo.connection.commit()
    if then is not None:
        t = token()
        assert repo.try_claim(attempt_id, t, "w1", 60) == 1
        finalize = repo.finalize_unknown(attempt_id, t, "read timeout") if then == "unknown" else (
            repo.finalize_sent(attempt_id, t, f"ses-own-{attempt_id}"))  # fmt: skip
        assert finalize == 1
    return attempt_id


def tagged_bounce(repo: OutboxRepository, row: int, recipient: str, message_id: str) -> Any:
    """A permanent bounce for `recipient` under SES MessageId `message_id`, tagged with `row`."""
    return repo.record_provider_event(
        event_type="Bounce", ses_message_id=message_id, outbox_id=str(row), recipient=recipient,
        event_at=datetime(2026, 12, 1, 10, 0, 0), kind="Permanent", subkind="General", detail=None,
        recorded_by="test",
    )  # fmt: skip


def test_a_bounce_for_a_cc_is_recorded_by_the_tag_and_suppresses_the_cc_but_settles_nothing(
    repo: OutboxRepository,
) -> None:
    """A whole message's cc and bcc are its recipients too: before SES's MessageId is known to the
    outbox (an UnknownOutcome row), the outbox_id tag matched only the first to, so a bounce for a cc
    stayed unmatched and the cc was never suppressed. A cc match is a record, not evidence: an archive
    address that another outbox sharing the SES account also copies must not settle this row."""
    attempt_id = message_row(
        repo,
        "o-cc-bounce",
        to=["ann@example.com"],
        cc=['"Lee, Carl" <Carl@Example.COM>'],
        bcc=["dee@example.com"],
    )
    t = token()
    assert repo.try_claim(attempt_id, t, "w1", 60) == 1
    at = datetime(2026, 12, 1, 10, 0, 0)
    # Recorded while the row is still Processing, so the late resolver sees it too.
    bounce = record("Bounce", "ses-cc-1", "Carl@example.com", str(attempt_id), at, bounce_subtype="General")
    ingest(repo, bounce)
    assert repo.finalize_unknown(attempt_id, t, "read timeout") == 1
    ingest(repo, record("Complaint", "ses-cc-1", "dee@example.com", str(attempt_id), at))
    assert sorted(s.address for s in repo.suppressed_addresses()) == ["Carl@example.com", "dee@example.com"]
    assert (
        scalar(repo, "SELECT COUNT(*) FROM email_provider_events WHERE attempt_id = %s", (attempt_id,)) == 2
    )
    assert repo.resolve_unknown_from_evidence(100, "test") == 0
    assert repo.get_row(attempt_id).status is Status.UNKNOWN_OUTCOME, "a cc's event is no evidence"
    assert repo.provider_stats(86400, 0).unknown_without_evidence == 1, "so the row still needs an operator"
    ingest(repo, record("Delivery", "ses-cc-1", "ann@example.com", str(attempt_id), at))
    assert repo.get_row(attempt_id).status is Status.SENT, "the to's event is"
    stranger = tagged_bounce(repo, attempt_id, "eve@example.com", "ses-cc-2")
    assert (stranger.outcome, stranger.suppressed) == ("unmatched", 0), (
        "a tag still needs a recipient of the row"
    )


def test_a_cc_tag_does_not_match_a_row_already_sent(repo: OutboxRepository) -> None:
    """Two outboxes sharing an SES account both copy archive@: the other's row with this id, sent under
    another MessageId, must not be recorded against this row, which SES accepted under its own."""
    attempt_id = message_row(repo, "o-archive", "sent", to=["ann@example.com"], bcc=["archive@example.com"])
    assert tagged_bounce(repo, attempt_id, "archive@example.com", "ses-theirs").outcome == "unmatched"


def test_a_cc_tag_does_not_match_a_row_that_was_never_sent(repo: OutboxRepository) -> None:
    """Every recipient suppressed at enqueue: the row failed unsent, with its document unchanged, so
    an event naming one of its cc addresses is not about it."""
    for address in ("ann@example.com", "carl@example.com"):
        repo.suppression_add(address, "ops", "hard bounce")
    attempt_id = message_row(repo, "o-never-sent", to=["ann@example.com"], cc=["carl@example.com"])
    assert repo.get_row(attempt_id).status is Status.FAILED
    assert tagged_bounce(repo, attempt_id, "carl@example.com", "ses-never").outcome == "unmatched"


def test_a_cc_tag_matches_a_requeued_row_but_not_one_never_sent(repo: OutboxRepository) -> None:
    """A row requeued after UnknownOutcome may have reached SES on its first send, with no MessageId
    known: a bounce for its cc still suppresses the cc. A Pending row that was never claimed has not."""
    recipients = {"to": ["ann@example.com"], "cc": ["carl@example.com"]}
    requeued = message_row(repo, "o-requeued", "unknown", **recipients)
    fresh = message_row(repo, "o-fresh", **recipients)
    assert repo.requeue_unknown_outcome(requeued, "ops", "checked SES: nothing") == 1
    for row, outcome, suppressed in ((fresh, "unmatched", 0), (requeued, "recorded", 1)):
        result = tagged_bounce(repo, row, "carl@example.com", f"ses-first-{row}")
        assert (result.outcome, result.suppressed) == (outcome, suppressed), row
    assert repo.get_row(requeued).status is Status.PENDING, "recorded, not settled"


def test_a_recipient_left_out_as_suppressed_is_not_matched_by_the_tag(repo: OutboxRepository) -> None:
    repo.suppression_add("carl@example.com", "ops", "complained")
    attempt_id = message_row(repo, "o-cc-dropped", "unknown", to=["ann@example.com"], cc=["carl@example.com"])
    result = tagged_bounce(repo, attempt_id, "carl@example.com", "ses-dropped")
    assert result.outcome == "unmatched", "SES never saw that address for this row"


def test_the_consumer_refuses_a_visibility_timeout_it_could_not_keep_extended(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for bad in ("0", "-5", "43201"):
        assert main(["events", "--sqs-queue-url", "https://sqs.invalid/q", "--visibility-timeout", bad]) == 2
        assert "--visibility-timeout must be 1 to 43200 seconds" in capsys.readouterr().err


def test_a_message_id_matched_event_suppresses_only_a_recipient_of_that_rows_message(
    repo: OutboxRepository,
) -> None:
    """A MessageId is in every delivered message's headers, so it is no proof: a forged Complaint under
    a real MessageId naming cfo@bigcustomer.example put that address on the suppression list. Now the
    MessageId matches only for an address the row's message went to; any other is not this outbox's."""
    attempt_id = message_row(repo, "o-forged", "sent", to=["ann@example.com"], cc=["carl@example.com"])
    message_id = f"ses-own-{attempt_id}"

    def complaint(recipient: str) -> Any:
        return repo.record_provider_event(
            event_type="Complaint", ses_message_id=message_id, outbox_id=None, recipient=recipient,
            event_at=datetime(2026, 12, 1, 10, 0, 0), kind="abuse", subkind=None, detail=None,
            recorded_by="test",
        )  # fmt: skip

    forged = complaint("cfo@bigcustomer.example")
    assert (forged.outcome, forged.attempt_id, forged.suppressed) == ("unmatched", None, 0)
    assert repo.suppressed_addresses() == []
    assert repo.provider_state(attempt_id) is None, "nothing written for the row either"
    # Its real recipients, the to and the cc, are still matched and suppressed.
    for recipient in ("ann@example.com", "carl@Example.COM"):
        real = complaint(recipient)
        assert (real.outcome, real.attempt_id, real.suppressed) == ("recorded", attempt_id, 1), recipient
    assert sorted(s.address for s in repo.suppressed_addresses()) == ["ann@example.com", "carl@Example.COM"]
