"""OpenTelemetry end to end, against a real OTLP/HTTP receiver (tests/support/otlp_receiver.py): an
application's span enqueues (its context stored with the row), a real worker sends through the local
SES endpoint with one span per attempt (the enqueue's context the parent of the first attempt and a
link of the later one), and the events consumer's span for an SES event links to the send it belongs
to. Everything is configured by the standard OTEL_* variables, with a bearer token the receiver
requires."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytest.importorskip(
    "opentelemetry.sdk", reason="OpenTelemetry's SDK is not installed (the test extra has it)"
)
pytest.importorskip(
    "opentelemetry.proto", reason="opentelemetry-proto is not installed (the test extra has it)"
)

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidArgument, InvalidMember
from email_outbox.message import Message, enqueue_message
from email_outbox.models import Status
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from email_outbox_devtools.ses_events import record
from email_outbox_devtools.worker_process import spawn_worker
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan
from tests.support.worker_harness import drained, wait_until

ROOT = Path(__file__).resolve().parents[2]
CONSUMER = 5  # SpanKind.CONSUMER in the OTLP protocol
PRODUCER = 4

# The application's side, in a process of its own (a tracer provider is global to a process): a
# request span, inside it two enqueues, then the exporter flushed.
APPLICATION = """
import json, sys
import mysql.connector
from opentelemetry import trace
from email_outbox import Message, enqueue_message
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.tracing import configure_from_environment

shutdown = configure_from_environment("shop")
conn = mysql.connector.connect(**DatabaseDsn.parse(sys.argv[1]).connect_args(), autocommit=True)
with trace.get_tracer("shop").start_as_current_span("POST /checkout") as request:
    ids = [enqueue_message(conn, n, Message(to=[to], subject="s", text="t")).attempt_id
           for n, to in (("ok-1", "ann@example.com"), ("retry-1", "retry@example.com"))]
    context = request.get_span_context()
shutdown()
print(json.dumps({"ids": ids, "trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}))
"""


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver(token=uuid.uuid4().hex) as r:
        yield r


def otel_env(receiver: OtlpReceiver, token: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Bearer%20{token}",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def test_a_trace_runs_from_the_enqueue_through_every_send_attempt_to_the_ses_event(
    dsn: DatabaseDsn, repo: OutboxRepository, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    token = receiver.token
    env = {**os.environ, **otel_env(receiver, token)}
    app = subprocess.run(
        [sys.executable, "-c", APPLICATION, dsn.url()], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert app.returncode == 0, app.stderr[-3000:]
    started = json.loads(app.stdout.strip().splitlines()[-1])
    ok_id, retry_id = started["ids"]

    sends = named(receiver.spans(), "send email_outbox")
    assert len(sends) == 2 and all(s.kind == PRODUCER and s.service == "shop" for s in sends)
    assert {s.parent_span_id for s in sends} == {started["span_id"]}, "the enqueue is a child of the request"
    enqueue_of = {str(s.attributes["messaging.message.id"]): s for s in sends}
    assert enqueue_of[str(ok_id)].attributes["messaging.system"] == "email_outbox"
    assert enqueue_of[str(ok_id)].attributes["messaging.operation.type"] == "send"

    with SesEndpoint() as endpoint:
        endpoint.set_faults(FaultRule("error", remaining=1, match="retry@", status=500))
        worker = spawn_worker(
            dsn, endpoint.url, tmp_path, "w",
            env={**otel_env(receiver, token), "EMAIL_OUTBOX_POLL_INTERVAL": "0.1", "OTEL_SERVICE_NAME": "mailer"},
            lease_seconds=6, ses_connect_timeout=1, ses_read_timeout=2, retry_base_seconds=0.2,
        )  # fmt: skip
        try:
            wait_until(lambda: drained(repo), 60, "both emails to be sent")
        finally:
            assert worker.terminate() == 0, worker.log()[-3000:]
        accepted = {m.outbox_id: m.request for m in endpoint.accepted()}
    assert repo.get_row(ok_id).status is Status.SENT and repo.get_row(retry_id).status is Status.SENT
    wait_until(lambda: len(named(receiver.spans(), "deliver email_outbox")) >= 3, 30, "the worker's spans")

    attempts = named(receiver.spans(), "deliver email_outbox")
    assert all(s.kind == CONSUMER and s.service == "mailer" for s in attempts)
    by_row: dict[str, list[ReceivedSpan]] = {}
    for span in attempts:
        assert span.attributes["messaging.system"] == "email_outbox"
        assert span.attributes["messaging.operation.type"] == "process"
        by_row.setdefault(str(span.attributes["messaging.message.id"]), []).append(span)
    (ok,) = by_row[str(ok_id)]
    first, later = sorted(by_row[str(retry_id)], key=lambda s: int(s.attributes["email_outbox.attempt"]))

    enqueued = enqueue_of[str(ok_id)]
    assert (ok.trace_id, ok.parent_span_id) == (enqueued.trace_id, enqueued.span_id), "first attempt: child"
    assert ok.attributes["email_outbox.notification_id"] == "ok-1"
    assert ok.attributes["email_outbox.outcome"] == "accepted"
    ses_message_id = ok.attributes["email_outbox.ses_message_id"]
    assert ses_message_id and "error.type" not in ok.attributes

    retry_enqueue = enqueue_of[str(retry_id)]
    assert first.parent_span_id == retry_enqueue.span_id and first.attributes["email_outbox.attempt"] == 1
    assert first.attributes["email_outbox.outcome"] == "transient" and first.attributes["error.type"]
    assert first.status_code == 2  # STATUS_CODE_ERROR
    assert (
        later.attributes["email_outbox.attempt"] == 2
        and later.attributes["email_outbox.outcome"] == "accepted"
    )
    assert later.parent_span_id == "" and later.trace_id != retry_enqueue.trace_id, (
        "a later attempt: its own trace"
    )
    assert later.links == [(retry_enqueue.trace_id, retry_enqueue.span_id)], "linked to the enqueue"

    # The worker gave SES the send's traceparent as an email tag, and SES's events carry the tags back.
    tags = {t["Name"]: t["Value"] for t in accepted[str(ok_id)]["EmailTags"]}
    assert tags["otel_traceparent"].startswith(f"00-{ok.trace_id}-{ok.span_id}-")
    delivery = record("Delivery", str(ses_message_id), "ann@example.com", str(ok_id), datetime.now(UTC))
    delivery["mail"]["tags"]["otel_traceparent"] = [tags["otel_traceparent"]]
    events_file = tmp_path / "events.jsonl"
    events_file.write_text(json.dumps(delivery) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "email_outbox.cli", "events", "--from-file", str(events_file)],
        cwd=ROOT, env={**env, "EMAIL_OUTBOX_DSN": dsn.url(), "OTEL_SERVICE_NAME": "events"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (event,) = named(receiver.spans(), "process aws_ses_events")
    assert event.service == "events" and event.kind == CONSUMER
    assert event.attributes["messaging.message.id"] == ses_message_id
    assert event.attributes["email_outbox.event_type"] == "Delivery"
    assert event.links == [(ok.trace_id, ok.span_id)], "the SES event links to its send"
    assert receiver.refused == 0


def test_an_exporter_without_the_token_is_refused_by_the_receiver(
    receiver: OtlpReceiver,
) -> None:
    env = {**os.environ, **otel_env(receiver, "wrong-token")}
    script = (
        "from opentelemetry import trace\nfrom email_outbox.tracing import configure_from_environment\n"
        "shutdown = configure_from_environment('x')\n"
        "trace.get_tracer('x').start_span('one').end()\nshutdown()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert receiver.spans() == [] and receiver.refused >= 1


def test_a_trace_context_member_is_checked_and_stored(repo: OutboxRepository) -> None:
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    enqueue_message(repo.connection, "traced", Message(to=["a@example.com"], subject="s", text="t",
                                                       trace_context={"traceparent": parent, "tracestate": "k=v"}))  # fmt: skip
    options = json.loads(
        repo._select("SELECT message_options FROM email_delivery_attempts")[0]["message_options"]
    )
    assert options["trace_context"] == {"traceparent": parent, "tracestate": "k=v"}
    for bad, refusal in (
        ({"traceparent": parent.upper()}, InvalidArgument),
        ({"traceparent": parent, "baggage": "x"}, InvalidMember),
        ("00-abc", InvalidMember),
        ({"traceparent": parent, "tracestate": "x" * 513}, InvalidArgument),
    ):
        document = {"to": ["a@example.com"], "subject": "s", "text": "t", "trace_context": bad}
        with pytest.raises(Exception) as raised:
            enqueue_message(repo.connection, "bad", document)
        assert getattr(raised.value, "errno", None) == refusal.errno, raised.value
