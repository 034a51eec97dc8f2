"""The lean SendEmail client (email_outbox.ses.lean_client) against real peers: the local SES endpoint
with its faults, and moto's server checking SigV4 signatures. Every fault is put to the boto3 client
and to the lean one; the worker must reach the same Decision from both."""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from email_outbox.models import Attachment, ClaimedEmail
from email_outbox.ses.classify import Decision, Outcome, classify_exception
from email_outbox.ses.lean_client import LeanSesClient
from email_outbox.ses.sender import SesSender, make_send_client
from email_outbox.worker.config import load_config
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import FaultRule, SesEndpoint
from tests.support.ses_clients import CLIENT_KINDS, ses_client

DSN = "mysql://u:p@127.0.0.1:3306/db"
EMAIL = ClaimedEmail(1, "n-1", "user@example.com", "shop@example.com", "s", "hello", "<p>hi</p>", 0, 5)


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def send(kind: str, url: str, email: ClaimedEmail = EMAIL, **client: Any) -> Decision:
    config = load_config({}, {"EMAIL_OUTBOX_DSN": DSN})
    return SesSender(config, ses_client(kind, url, **client)).send(email)


def both(url: str, **client: Any) -> dict[str, tuple[Outcome, str | None]]:
    decisions = {kind: send(kind, url, **client) for kind in CLIENT_KINDS}
    return {kind: (d.outcome, d.error_code) for kind, d in decisions.items()}


def test_an_accepted_send_answers_the_message_id_through_both_clients(endpoint: SesEndpoint) -> None:
    decisions = [send(kind, endpoint.url) for kind in CLIENT_KINDS]
    assert [d.outcome for d in decisions] == [Outcome.ACCEPTED, Outcome.ACCEPTED]
    assert [d.message_id for d in decisions] == [m.message_id for m in endpoint.accepted()]
    boto3_request, lean_request = (m.request for m in endpoint.accepted())
    assert lean_request == boto3_request, "the lean client sends the very request boto3 sends"


def _fault_id(fault: FaultRule) -> str:
    return "-".join(
        str(p) for p in (fault.kind, fault.status if "error" in fault.kind else "", fault.code) if p
    )


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (FaultRule("reject"), (Outcome.PERMANENT, "MessageRejected")),
        (FaultRule("throttle"), (Outcome.THROTTLED, "TooManyRequestsException")),
        (FaultRule("account"), (Outcome.ACCOUNT_PROBLEM, "SendingPausedException")),
        (FaultRule("account", code="AccountSuspendedException"), (Outcome.ACCOUNT_PROBLEM, "AccountSuspendedException")),
        (FaultRule("error", status=403, code="SignatureDoesNotMatch"), (Outcome.ACCOUNT_PROBLEM, "SignatureDoesNotMatch")),
        (FaultRule("error", status=400, code="SomeNewRefusal"), (Outcome.PERMANENT, "SomeNewRefusal")),
        (FaultRule("error"), (Outcome.TRANSIENT, "InternalFailure")),
        (FaultRule("error", status=503, code="ServiceUnavailable"), (Outcome.TRANSIENT, "ServiceUnavailable")),
        (FaultRule("bare_error", status=502), (Outcome.TRANSIENT, "502")),
        (FaultRule("bare_error", status=429), (Outcome.THROTTLED, "429")),
        (FaultRule("no_message_id"), (Outcome.AMBIGUOUS, "NoMessageId")),
        (FaultRule("reset_after_accept"), (Outcome.AMBIGUOUS, "ConnectionClosedError")),
        (FaultRule("reset_before_accept"), (Outcome.AMBIGUOUS, "ConnectionClosedError")),
        (FaultRule("timeout_after_accept", seconds=2), (Outcome.AMBIGUOUS, "ReadTimeout")),
    ],
    ids=lambda v: _fault_id(v) if isinstance(v, FaultRule) else v[0].value,
)  # fmt: skip
def test_every_answer_and_failure_is_classified_alike_by_both_clients(
    endpoint: SesEndpoint, fault: FaultRule, expected: tuple[Outcome, str]
) -> None:
    endpoint.set_faults(fault)
    assert both(endpoint.url, read_timeout=1) == {kind: expected for kind in CLIENT_KINDS}


def test_a_refused_connection_proves_the_request_never_left_for_both_clients() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert both(url) == {kind: (Outcome.TRANSIENT, "ConnectFailed") for kind in CLIENT_KINDS}


def test_a_request_botocore_would_refuse_never_leaves_the_lean_client(endpoint: SesEndpoint) -> None:
    """botocore's validator runs before anything is sent, as in boto3: a malformed request is a
    permanent failure of that email, not an ambiguous send."""
    client = ses_client("lean", endpoint.url)
    sender = SesSender(load_config({}, {"EMAIL_OUTBOX_DSN": DSN}), client)
    request = sender._request(EMAIL)
    request["Destination"]["ToAddresses"] = [7]
    with pytest.raises(Exception) as raised:
        client.send_email(**request)
    decision = classify_exception(raised.value)
    assert (decision.outcome, decision.error_code) == (Outcome.PERMANENT, "ParamValidation")
    assert endpoint.state.requests == 0


def test_raw_content_and_attachments_arrive_byte_for_byte(endpoint: SesEndpoint) -> None:
    blob = bytes(range(256)) * 40
    email = ClaimedEmail(
        2, "n-2", "user@example.com", "shop@example.com", "s", "hello", "<p><img src='cid:logo'></p>", 0, 5,
        attachments=(
            Attachment("data.bin", "application/octet-stream", "attachment", None, blob),
            Attachment("logo.png", "image/png", "inline", "logo", b"\x89PNG\r\n\x1a\n" + blob[:100]),
        ),
    )  # fmt: skip
    for kind in CLIENT_KINDS:
        assert send(kind, endpoint.url, email).outcome is Outcome.ACCEPTED
    boto3_request, lean_request = (m.request for m in endpoint.accepted())
    assert lean_request == boto3_request
    attachments = lean_request["Content"]["Simple"]["Attachments"]
    assert [base64.b64decode(a["RawContent"]) for a in attachments] == [
        blob,
        b"\x89PNG\r\n\x1a\n" + blob[:100],
    ]
    # Raw content, as the sender uses it when the pinned botocore's Simple content lacks attachments.
    mime = b"From: shop@example.com\r\nTo: user@example.com\r\nSubject: raw\r\n\r\n\xff\x00binary"
    raw = {"FromEmailAddress": "shop@example.com", "Destination": {"ToAddresses": ["user@example.com"]},
           "Content": {"Raw": {"Data": mime}}}  # fmt: skip
    for kind in CLIENT_KINDS:
        assert ses_client(kind, endpoint.url).send_email(**raw)["MessageId"]
    raw_requests = [m.request for m in endpoint.accepted()[2:]]
    assert raw_requests[0] == raw_requests[1]
    assert base64.b64decode(raw_requests[1]["Content"]["Raw"]["Data"]) == mime


def test_the_worker_settings_choose_the_client_and_aws_endpoint_url_sesv2_is_honoured(
    endpoint: SesEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "AWS_ENDPOINT_URL_SESV2": endpoint.url, "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "env-key", "AWS_SECRET_ACCESS_KEY": "env-secret",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    lean = make_send_client(load_config({}, {"EMAIL_OUTBOX_DSN": DSN}))
    boto3_client = make_send_client(load_config({"ses_client": "boto3"}, {"EMAIL_OUTBOX_DSN": DSN}))
    assert isinstance(lean, LeanSesClient) and not isinstance(boto3_client, LeanSesClient)
    for client in (lean, boto3_client):
        assert client.send_email(
            **SesSender(load_config({}, {"EMAIL_OUTBOX_DSN": DSN}), client)._request(EMAIL)
        )
    assert len(endpoint.accepted()) == 2
    with pytest.raises(Exception, match="EMAIL_OUTBOX_SES_CLIENT must be one of lean, boto3"):
        load_config({"ses_client": "fast"}, {"EMAIL_OUTBOX_DSN": DSN})


def test_the_lean_client_is_signed_as_aws_checks_it_and_a_wrong_key_is_refused() -> None:
    """moto's server with its IAM checks on: it recomputes each request's SigV4 signature from what
    arrived on the wire and refuses a mismatch."""
    from moto.server import ThreadedMotoServer

    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    moto.start()
    host, port = moto.get_host_and_port()
    url = f"http://{host}:{port}"
    try:
        admin = ses_client("boto3", url)
        admin.create_email_identity(EmailIdentity="shop@example.com")
        iam = _boto3_iam(url)
        iam.create_user(UserName="sender")
        key = iam.create_access_key(UserName="sender")["AccessKey"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "ses:*", "Resource": "*"}],
        }
        iam.put_user_policy(UserName="sender", PolicyName="send", PolicyDocument=json.dumps(policy))
        _moto_auth(url, "0")  # from here on every request is authenticated
        keys = {"access_key": key["AccessKeyId"], "secret_key": key["SecretAccessKey"]}
        for kind in CLIENT_KINDS:
            assert send(kind, url, **keys).outcome is Outcome.ACCEPTED, kind
        wrong = {"access_key": key["AccessKeyId"], "secret_key": "not-the-secret"}
        # moto refuses in its XML dialect, which a rest-json parser reads as a bare 403 (SES itself
        # would name SignatureDoesNotMatch); what counts is that both clients were refused alike.
        assert both(url, **wrong) == {kind: (Outcome.PERMANENT, "403") for kind in CLIENT_KINDS}
    finally:
        _moto_auth(url, "inf")
        moto.stop()


def _boto3_iam(url: str) -> Any:
    return boto3.session.Session(
        aws_access_key_id="test", aws_secret_access_key="test", region_name="us-east-1"
    ).client("iam", endpoint_url=url)


def _moto_auth(url: str, unauthenticated_requests: str) -> None:
    """moto's switch for its IAM checks: how many more requests go through unauthenticated."""
    request = urllib.request.Request(
        f"{url}/moto-api/reset-auth",
        data=unauthenticated_requests.encode(),
        headers={"Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        answer.read()
