"""Whole messages. email_enqueue_message refuses bad documents with a 45000 naming the member
and the rule, and writes nothing; a good one is stored (attachments apart) and sent byte-exact: the local
SES endpoint records the whole request, and every recipient, header, tag and attachment byte is compared
with what was enqueued."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import mysql.connector
import pytest

from email_outbox import Attachment, Message, Template, enqueue_message
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidInput
from email_outbox.models import Attachment as StoredAttachment
from email_outbox.models import ClaimedEmail, Status
from email_outbox.ses.classify import Outcome
from email_outbox.ses.sender import SesSender, build_request, encode_mailbox
from email_outbox.worker.config import load_config
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.support.harness import TestServer
from tests.support.helpers import token
from tests.support.ses_clients import ses_client
from tests.support.worker_harness import drained, spawn_worker, wait_until

EVERY_BYTE = bytes(range(256)) * 4
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
FAST = {"lease_seconds": 6, "ses_connect_timeout": 1, "ses_read_timeout": 2}


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def full_message() -> Message:
    return Message(
        sender="Ünïcode Shop <shop@example.com>",
        to=["Ann Lee <ann@example.com>", "bob@example.com"],
        cc=['"Lee, Carl" <carl@example.com>'],
        bcc=["audit@example.com"],
        reply_to=["Support 🛟 <help@example.com>"],
        subject="Your invoice 🧾 #42",
        text="Hello 👋 — the invoice is attached.",
        html='<p>Hello 👋</p><img src="cid:logo@example.com">',
        headers={
            "List-Unsubscribe": "<https://example.com/u/42>, <mailto:u@example.com?subject=42>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            "X-Order": "42",
        },
        tags={"campaign": "invoices", "tenant": "t-7"},
        configuration_set="transactional",
        attachments=[
            Attachment("every-byte.bin", "application/octet-stream", EVERY_BYTE),
            Attachment("logo.png", "image/png", PIXEL, disposition="inline", content_id="logo@example.com"),
            Attachment("Rechnung März.pdf", "application/pdf", b"%PDF-1.4 fake"),
        ],
        max_attempts=3,
    )


def test_a_whole_message_is_stored_apart_from_its_attachments(repo: OutboxRepository) -> None:
    result = enqueue_message(repo.connection, "inv-42", full_message())
    assert result.affected == 1
    again = enqueue_message(repo.connection, "inv-42", full_message())
    assert (again.affected, again.attempt_id) == (0, result.attempt_id), "idempotent on notification_id"
    row = repo._select(
        "SELECT to_address, from_address, subject, max_attempts, attachment_bytes, message_options"
        " FROM email_delivery_attempts WHERE id = %s",
        (result.attempt_id,),
    )[0]
    assert (row["to_address"], row["from_address"]) == ("ann@example.com", "shop@example.com")
    assert row["attachment_bytes"] == len(EVERY_BYTE) + len(PIXEL) + len(b"%PDF-1.4 fake")
    options = json.loads(row["message_options"])
    assert options["cc"] == ['"Lee, Carl" <carl@example.com>'] and options["attachment_count"] == 3
    assert "attachments" not in options and "text" not in options, "claims never carry attachments"
    stored = repo._select(
        "SELECT position, filename, content FROM email_attachments WHERE attempt_id = %s ORDER BY position",
        (result.attempt_id,),
    )
    assert (stored[0]["filename"], bytes(stored[0]["content"])) == ("every-byte.bin", EVERY_BYTE)
    assert stored[2]["filename"] == "Rechnung März.pdf"


def test_it_never_commits_the_callers_transaction(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=False)
    try:
        conn.start_transaction()
        enqueue_message(conn, "rolled-back", full_message())
        conn.rollback()
    finally:
        conn.close()
    assert repo._select("SELECT COUNT(*) AS n FROM email_attachments")[0]["n"] == 0
    assert sum(s.count for s in repo.outbox_stats()) == 0


def _base(**extra: Any) -> dict[str, Any]:
    return {"to": ["a@example.com"], "subject": "s", "text": "t", **extra}


REFUSALS: list[tuple[Any, str]] = [
    ("not json", "message must be one JSON object"),
    ([1, 2], "message must be one JSON object"),
    (_base(bcc_list=["x@example.com"]), 'unknown member "bcc_list"'),
    ({"subject": "s", "text": "t"}, "together must hold 1 to 50 addresses"),
    (_base(to=[f"u{i}@example.com" for i in range(30)], cc=[f"c{i}@example.com" for i in range(21)]), "1 to 50"),
    (_base(to="a@example.com"), "to must be a list of addresses"),
    (_base(to=[7]), "to[0] must be a string"),
    (_base(cc=["a@example.com, b@example.com"]), "cc[0] must be an address"),
    (_base(to=["Ann <ann@example.com> <x@example.com>"]), "to[0] display name"),
    (_base(reply_to=["x\r\nBcc: y@example.com"]), "reply_to[0] must not contain control characters"),
    (_base(subject=5), "subject must be a string"),
    (_base(headers={"Bcc": "x@example.com"}), "header Bcc is set by SES or the outbox"),
    (_base(headers={"content-type": "text/plain"}), "header content-type is set by SES or the outbox"),
    (_base(headers={"X Bad": "v"}), "must be 1 to 76 printable ASCII characters"),
    (_base(headers={"X-A": "a\nBcc: x@example.com"}), "headers.X-A must not contain control characters"),
    (_base(headers={"X-A": "x" * 999}), "headers.X-A must be a string of at most 998 characters"),
    (_base(headers=["X-A"]), "headers must be an object"),
    (_base(tags={"outbox_id": "1"}), "tag outbox_id is reserved"),
    (_base(tags={"camp aign": "x"}), "tag name"),
    (_base(tags={"c": "x y"}), "tags.c must be 1 to 256 ASCII letters"),
    (_base(configuration_set="a b"), "configuration_set must be"),
    (_base(max_attempts="3"), "max_attempts must be an integer from 1 to 100"),
    (_base(max_attempts=0), "max_attempts must be an integer from 1 to 100"),
    (_base(send_after="2026-12-24 09:00"), "send_after must be ISO 8601 with an offset"),
    (_base(send_after="2026-02-30T09:00:00Z"), "send_after is not a real time"),
    (_base(send_after="2099-01-01T00:00:00Z"), "send_after must be NULL or a UTC time"),
    (_base(attachments={"filename": "x"}), "attachments must be a list"),
    (_base(attachments=[{"filename": "../etc/passwd", "content_type": "text/plain", "content_base64": "eA=="}]),
     "attachments[0].filename must be 1 to 255 characters with no path"),
    (_base(attachments=[{"filename": "a\x07.txt", "content_type": "text/plain", "content_base64": "eA=="}]),
     "attachments[0].filename must not contain control characters"),
    (_base(attachments=[{"filename": "a.txt", "content_type": "text", "content_base64": "eA=="}]),
     "attachments[0].content_type must be a media type"),
    (_base(attachments=[{"filename": "a.txt", "content_type": "text/plain", "content_base64": "%%%"}]),
     "attachments[0].content_base64 must be base64 that decodes"),
    (_base(attachments=[{"filename": "a", "content_type": "a/b", "content_base64": "eA==", "disposition": "x"}]),
     "attachments[0].disposition must be attachment or inline"),
    (_base(attachments=[{"filename": "a", "content_type": "a/b", "content_base64": "eA==", "content_id": "<x>"}]),
     "attachments[0].content_id must be"),
    (_base(attachments=[{"filename": "a", "content_type": "a/b", "content_base64": "eA==", "size": 1}]),
     "attachments[0] must be an object of"),
    ({"to": ["a@example.com"], "template": {"name": "t"}, "subject": "s"}, "takes its subject, text and html"),
    ({"to": ["a@example.com"], "template": {"name": "bad name"}}, "template.name must be"),
    ({"to": ["a@example.com"], "template": {"name": "t", "data": [1]}}, "template.data must be a JSON object"),
    (_base(**{"from": "Shop <shop@not-allowed.test>"}), "is not an allowed sender"),
]  # fmt: skip


@pytest.mark.parametrize(("document", "rule"), REFUSALS, ids=[r for _, r in REFUSALS])
def test_a_bad_document_is_refused_naming_the_member_and_nothing_is_written(
    repo: OutboxRepository, document: Any, rule: str
) -> None:
    text = document if isinstance(document, str) else json.dumps(document)
    with pytest.raises(InvalidInput, match="email_enqueue_message") as caught:
        repo.enqueue_message("refused", text)
    assert rule in str(caught.value)
    assert sum(s.count for s in repo.outbox_stats()) == 0
    assert repo._select("SELECT COUNT(*) AS n FROM email_attachments")[0]["n"] == 0


def test_a_message_over_sess_40_mb_limit_is_refused(server: TestServer, dsn: DatabaseDsn) -> None:
    admin = server.admin_connection(dsn.database)
    cursor = admin.cursor()
    cursor.execute("SELECT @@GLOBAL.max_allowed_packet")
    (before,) = cursor.fetchone()  # type: ignore[misc]
    try:
        cursor.execute("SET GLOBAL max_allowed_packet = 134217728")
    except mysql.connector.Error as exc:
        admin.close()
        pytest.skip(
            f"SKIP: a 40 MB CALL needs max_allowed_packet above 40 MB and this account cannot set it: {exc}"
        )
    repo = OutboxRepository.open(dsn)  # a new session sees the new packet size
    # 42,000,000 bytes of base64 in two attachments: just over the limit (41,943,040), which counts the
    # bodies and the attachments as base64.
    chunk = base64.b64encode(b"\0" * 15_750_000).decode()
    document = _base(attachments=[{"filename": f"{i}.bin", "content_type": "application/octet-stream",
                                   "content_base64": chunk} for i in range(2)])  # fmt: skip
    try:
        with pytest.raises(InvalidInput, match="at most 40 MB"):
            repo.enqueue_message("huge", json.dumps(document))
        assert sum(s.count for s in repo.outbox_stats()) == 0, "nothing written"
        assert repo._select("SELECT COUNT(*) AS n FROM email_attachments")[0]["n"] == 0
    finally:
        repo.close()
        # The session's server is shared by every later test: its packet size goes back as it was.
        cursor.execute("SET GLOBAL max_allowed_packet = %s", (int(before),))  # type: ignore[call-overload]
        admin.close()


def test_send_after_with_an_offset_is_stored_in_utc(repo: OutboxRepository) -> None:
    from datetime import UTC, datetime, timedelta, timezone

    when = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    local = when.astimezone(timezone(timedelta(hours=5, minutes=30)))
    assert local.isoformat().endswith("+05:30"), "the document names an offset, not UTC"
    result = repo.enqueue_message("later", json.dumps(_base(send_after=local.isoformat())))
    row = repo.get_row(result.attempt_id)
    assert row.next_attempt_at == when.replace(tzinfo=None)


def _sent_request(endpoint: SesEndpoint, attempt_id: int) -> dict[str, Any]:
    (accepted,) = [m for m in endpoint.accepted() if m.outbox_id == str(attempt_id)]
    return accepted.request


def test_the_worker_sends_every_recipient_header_tag_and_attachment_byte_exact(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    message = full_message()
    attempt_id = enqueue_message(repo.connection, "inv-1", message).attempt_id
    templated = enqueue_message(repo.connection, "welcome-1", Message(
        to=["Zoë <zoe@example.com>"], template=Template("welcome", {"name": "Zoë 🎉", "items": [1, 2]}),
        headers={"X-Campaign": "spring"}, attachments=[Attachment("terms.txt", "text/plain", b"terms")],
    )).attempt_id  # fmt: skip
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", **FAST)
    try:
        wait_until(lambda: drained(repo), 60, "both messages to be sent")
    finally:
        assert worker.terminate() == 0, worker.log()[-3000:]
    assert repo.get_row(attempt_id).status is Status.SENT and repo.get_row(templated).status is Status.SENT

    sent = _sent_request(endpoint, attempt_id)
    assert sent["FromEmailAddress"] == encode_mailbox(message.sender or "")
    assert sent["FromEmailAddress"].startswith("=?utf-8?") and sent["FromEmailAddress"].endswith(
        "<shop@example.com>"
    )
    assert sent["Destination"] == {
        "ToAddresses": ["Ann Lee <ann@example.com>", "bob@example.com"],
        "CcAddresses": ['"Lee, Carl" <carl@example.com>'],
        "BccAddresses": ["audit@example.com"],
    }
    assert sent["ReplyToAddresses"] == [encode_mailbox("Support 🛟 <help@example.com>")]
    simple = sent["Content"]["Simple"]
    assert simple["Subject"]["Data"] == message.subject
    assert simple["Body"]["Text"]["Data"] == message.text and simple["Body"]["Html"]["Data"] == message.html
    assert {h["Name"]: h["Value"] for h in simple["Headers"]} == dict(message.headers)
    assert {t["Name"]: t["Value"] for t in sent["EmailTags"]} == {
        **message.tags,
        "outbox_id": str(attempt_id),
    }
    assert sent["ConfigurationSetName"] == "transactional"
    got = [(a["FileName"], a["ContentType"], a["ContentDisposition"], a.get("ContentId"),
            base64.b64decode(a["RawContent"])) for a in simple["Attachments"]]  # fmt: skip
    assert got == [
        ("every-byte.bin", "application/octet-stream", "ATTACHMENT", None, EVERY_BYTE),
        ("logo.png", "image/png", "INLINE", "logo@example.com", PIXEL),
        ("Rechnung März.pdf", "application/pdf", "ATTACHMENT", None, b"%PDF-1.4 fake"),
    ]

    template = _sent_request(endpoint, templated)["Content"]["Template"]
    assert template["TemplateName"] == "welcome"
    assert json.loads(template["TemplateData"]) == {"name": "Zoë 🎉", "items": [1, 2]}
    assert template["Headers"] == [{"Name": "X-Campaign", "Value": "spring"}]
    assert base64.b64decode(template["Attachments"][0]["RawContent"]) == b"terms"


def test_without_simple_attachments_the_same_message_goes_as_raw_mime_byte_exact(
    endpoint: SesEndpoint,
) -> None:
    message = full_message()
    options = {k: v for k, v in message.document().items()
               if k not in ("subject", "text", "html", "attachments", "max_attempts")}  # fmt: skip
    email = ClaimedEmail(
        id=9, notification_id="n", to_address="ann@example.com", from_address="shop@example.com",
        subject=message.subject or "", text_body=message.text, html_body=message.html, attempt_count=0,
        max_attempts=3, message_options=json.dumps(options),
        attachments=tuple(StoredAttachment(a.filename, a.content_type, a.disposition, a.content_id, a.content)
                          for a in message.attachments),
    )  # fmt: skip
    request = build_request(email, None, None)
    assert request["Destination"]["BccAddresses"] == ["audit@example.com"], "Bcc rides on the envelope only"
    # The sender takes Raw content when the pinned botocore's Simple content has no Headers or
    # Attachments (simple_ok false): what SES receives must be the whole message.
    sender = SesSender(load_config({}, {"EMAIL_OUTBOX_DSN": "mysql://u:p@127.0.0.1:3306/db"}),
                       ses_client("lean", endpoint.url))  # fmt: skip
    sender.simple_ok = False
    assert sender.send(email).outcome is Outcome.ACCEPTED
    (sent,) = [m.request for m in endpoint.accepted()]
    assert set(sent["Content"]) == {"Raw"} and sent["Destination"] == request["Destination"]
    raw = base64.b64decode(sent["Content"]["Raw"]["Data"])
    parsed = message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    assert parsed["Subject"] == message.subject and parsed["Cc"] == '"Lee, Carl" <carl@example.com>'
    assert parsed["From"] == "Ünïcode Shop <shop@example.com>" and "Bcc" not in parsed
    assert parsed["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    body = parsed.get_body(("plain",))
    assert body is not None and body.get_content().replace("\r\n", "\n").rstrip("\n") == message.text
    parts = {p.get_filename(): p for p in parsed.walk() if p.get_filename()}
    assert parts["every-byte.bin"].get_content() == EVERY_BYTE
    assert (
        parts["logo.png"]["Content-ID"] == "<logo@example.com>" and parts["logo.png"].get_content() == PIXEL
    )
    assert parts["Rechnung März.pdf"].get_content() == b"%PDF-1.4 fake"


def test_purge_clears_attachments_too(repo: OutboxRepository) -> None:
    attempt_id = enqueue_message(repo.connection, "old", full_message()).attempt_id
    cur = repo.connection.cursor()
    cur.execute(
        "UPDATE email_delivery_attempts SET status = 'Sent', updated_at = updated_at - INTERVAL 3 DAY"
        " WHERE id = %s",
        (attempt_id,),
    )
    cur.close()
    assert repo.purge_bodies(1, 100) == 1
    assert repo._select("SELECT COUNT(*) AS n FROM email_attachments")[0]["n"] == 0


def test_enqueue_json_takes_the_same_document(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path
) -> None:
    from email_outbox.cli.main import main

    document = {"notification_id": "cli-msg", **full_message().document()}
    path = tmp_path / "message.json"
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    assert main(["enqueue", "--json", str(path), "--dsn", dsn.url()]) == 0
    row = repo.get_row_by_notification_id("cli-msg")
    assert row.to_address == "ann@example.com"
    stored = repo._select(
        "SELECT content FROM email_attachments WHERE attempt_id = %s AND position = 0", (row.id,)
    )
    assert bytes(stored[0]["content"]) == EVERY_BYTE


def test_show_lists_the_attachments_and_the_message_options(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    from email_outbox.cli.main import main

    attempt_id = enqueue_message(repo.connection, "shown", full_message()).attempt_id
    assert main(["show", str(attempt_id), "--dsn", dsn.url()]) == 0
    out = capsys.readouterr().out
    assert "attachments (3):" in out and "every-byte.bin" in out and str(len(EVERY_BYTE)) in out
    assert "List-Unsubscribe-Post" in out, "the headers are in message_options"
    assert main(["show", str(attempt_id), "--json", "--dsn", dsn.url()]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [a["filename"] for a in data["attachments"]] == ["every-byte.bin", "logo.png", "Rechnung März.pdf"]


def test_suppressed_recipients_are_left_out_and_an_all_suppressed_message_fails(
    repo: OutboxRepository,
) -> None:
    repo.suppression_add("carl@EXAMPLE.com", "ops", "complained")  # the domain compares case-insensitively
    repo.suppression_add("ann@example.com", "ops", "hard bounce")
    attempt_id = enqueue_message(repo.connection, "partly", full_message()).attempt_id
    row = repo.get_row(attempt_id)
    options = json.loads(row.message_options or "{}")
    assert row.status is Status.PENDING and row.to_address == "bob@example.com", "the first one left"
    assert options["to"] == ["bob@example.com"] and options["cc"] == []
    assert sorted(options["suppressed_recipients"]) == [
        '"Lee, Carl" <carl@example.com>',
        "Ann Lee <ann@example.com>",
    ]
    alone = enqueue_message(
        repo.connection, "all-suppressed", Message(to=["ann@example.com"], subject="s", text="t")
    )
    failed = repo.get_row(alone.attempt_id)
    assert failed.status is Status.FAILED and failed.last_error_code == "Suppressed"


def test_a_cc_suppressed_after_the_enqueue_is_left_out_at_the_claim(
    dsn: DatabaseDsn, repo: OutboxRepository, endpoint: SesEndpoint, tmp_path: Path
) -> None:
    attempt_id = enqueue_message(repo.connection, "later-suppressed", full_message()).attempt_id
    repo.suppression_add("carl@example.com", "ops", "complained after the enqueue")
    worker = spawn_worker(dsn, endpoint.url, tmp_path, "w", **FAST)
    try:
        wait_until(lambda: drained(repo), 60, "the message to be sent")
    finally:
        assert worker.terminate() == 0, worker.log()[-3000:]
    sent = _sent_request(endpoint, attempt_id)
    assert "CcAddresses" not in sent["Destination"], "the suppressed cc never reached SES"
    assert sent["Destination"]["ToAddresses"] == ["Ann Lee <ann@example.com>", "bob@example.com"]
    options = json.loads(repo.get_row(attempt_id).message_options or "{}")
    assert options["suppressed_recipients"] == ['"Lee, Carl" <carl@example.com>']


CLAIM_ROW_SHAPE = [
    "id", "notification_id", "to_address", "from_address", "subject", "text_body", "html_body",
    "attempt_count", "max_attempts", "lease_expires_at", "body_bytes", "message_options", "attachment_bytes",
    "tenant", "ses_tenant_name",
    "created_at",
]  # fmt: skip


def _call_columns(repo: OutboxRepository, sql: str, args: tuple[object, ...]) -> tuple[list[str], list[Any]]:
    """A raw CALL (as a client in another language makes it): its first result's columns and rows."""
    cursor = repo.connection.cursor()
    try:
        cursor.execute(sql, args)
        columns = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
        while cursor.nextset():
            if cursor.with_rows:
                cursor.fetchall()
        return columns, rows
    finally:
        cursor.close()


@pytest.mark.parametrize(
    ("procedure", "extra"),
    [
        ("email_claim_batch", ()),
        ("email_claim_batch_bounded", (1 << 20,)),
        ("email_reserve_batch", (1 << 20,)),
    ],
)
def test_every_batch_claim_hands_out_one_row_shape(
    repo: OutboxRepository, procedure: str, extra: tuple[int, ...]
) -> None:
    """The seed's claim, the worker's, the deprecated name and the reservation: one row shape, with the
    message's options and the size of its attachments, so a worker built on any of them sends it all."""
    attempt_id = enqueue_message(repo.connection, f"shape-{procedure}", full_message()).attempt_id
    placeholders = ", ".join(["%s"] * (4 + len(extra)))
    columns, rows = _call_columns(
        repo, f"CALL {procedure}({placeholders})", (token(), "other-language", 60, 10, *extra)
    )
    assert columns == CLAIM_ROW_SHAPE
    (row,) = rows
    claimed = dict(zip(columns, row, strict=True))
    assert claimed["id"] == attempt_id
    options = json.loads(claimed["message_options"])
    assert options["cc"] == ['"Lee, Carl" <carl@example.com>'] and options["attachment_count"] == 3
    assert claimed["attachment_bytes"] == len(EVERY_BYTE) + len(PIXEL) + len(b"%PDF-1.4 fake")
    assert claimed["text_body"] == "Hello 👋 — the invoice is attached."


def test_the_per_row_claim_hands_out_the_same_row_and_checks_every_recipient(repo: OutboxRepository) -> None:
    """email_try_claim answers `affected` and then the claim row shape, as claimed: a cc suppressed
    since the enqueue is left out there (not only the first recipient is checked), and the candidate
    list carries the same message columns."""
    attempt_id = enqueue_message(repo.connection, "per-row", full_message()).attempt_id
    repo.suppression_add("carl@example.com", "ops", "complained after the enqueue")
    repo.suppression_add("audit@EXAMPLE.com", "ops", "bounced after the enqueue")
    columns, rows = _call_columns(repo, "CALL email_claimable_candidates(%s)", (10,))
    candidate = dict(zip(columns, rows[0], strict=True))
    assert {"body_bytes", "message_options", "attachment_bytes"} <= set(columns)
    assert candidate["id"] == attempt_id and candidate["attachment_bytes"] > 0

    t = token()
    columns, rows = _call_columns(repo, "CALL email_try_claim(%s, %s, %s, %s)", (attempt_id, t, "w", 60))
    assert columns == ["affected", *CLAIM_ROW_SHAPE]
    claimed = dict(zip(columns, rows[0], strict=True))
    assert claimed["affected"] == 1 and claimed["id"] == attempt_id
    options = json.loads(claimed["message_options"])
    assert "cc" not in options or options["cc"] == [], "the suppressed cc is not handed out"
    assert "audit@example.com" not in json.dumps(options.get("bcc", [])), "nor the suppressed bcc"
    assert sorted(options["suppressed_recipients"]) == ['"Lee, Carl" <carl@example.com>', "audit@example.com"]
    assert options["to"] == ["Ann Lee <ann@example.com>", "bob@example.com"]

    columns, rows = _call_columns(
        repo, "CALL email_try_claim(%s, %s, %s, %s)", (attempt_id, token(), "w2", 60)
    )
    lost = dict(zip(columns, rows[0], strict=True))
    assert lost["affected"] == 0 and all(lost[c] is None for c in CLAIM_ROW_SHAPE), "nothing handed out"
