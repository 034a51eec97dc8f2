"""The third security review (issue 38), through CALL on a real server: erasure finds an address by its
value whatever its JSON spelling; retention touches only the rows it deleted and keeps idempotency at
least 30 days; redrive refuses a row whose content is gone; the breaker's probe delay and the rates a
worker reports are bounded; headers that carry another system's verdict, display names that read as
an address and non-ASCII local parts are refused."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from datetime import timedelta

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidAddress, InvalidArgument, InvalidHeader, InvalidInput
from email_outbox.models import Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import scalar, token
from tests.support.history import claim, rows, whole_message
from tests.support.worker_harness import wait_until


# --- 1. erasure by value -----------------------------------------------------------------------------
def test_recipients_written_with_json_escapes_are_stored_plain_and_erased(repo: OutboxRepository) -> None:
    # What Python's json.dumps and PHP's json_encode write: @ and non-ASCII as \u escapes.
    message = (
        '{"to": ["bob@example.com"], "cc": ["ann\\u0040example.net"],'
        ' "bcc": ["J\\u00f6rg <jorg@ex\\u00e4mple.de>"], "subject": "hi", "text": "x"}'
    )
    attempt_id = repo.enqueue_message(f"esc-{token()}", message).attempt_id
    assert attempt_id is not None
    stored = scalar(repo, "SELECT message_options FROM email_delivery_attempts WHERE id = %s", (attempt_id,))
    assert "\\u" not in stored, stored
    assert json.loads(stored)["cc"] == ["ann@example.net"]
    assert json.loads(stored)["bcc"] == ["Jörg <jorg@exämple.de>"]
    assert repo.erase_address("ann@example.net", "dpo", "request 1").erased == 1
    row = repo.get_row(attempt_id)
    assert row.status is Status.FAILED and row.last_error_code == "Erased"


def test_erasure_finds_an_address_stored_escaped_before_the_normal_form(repo: OutboxRepository) -> None:
    attempt_id = repo.enqueue_message(
        f"old-{token()}", whole_message("to@example.com", "x@example.com")
    ).attempt_id
    # A row stored by an earlier release, as it was written.
    escaped = json.dumps({"to": ["to@example.com"], "cc": ["carl\\u0040example.org"]}).replace("\\\\", "\\")
    repo.connection.cursor().execute(  # the test's own back door: no procedure writes this
        "UPDATE email_delivery_attempts SET message_options = %s WHERE id = %s", (escaped, attempt_id)
    )
    assert repo.erase_address("Carl@example.org", "dpo", "request 2").erased == 1


# --- 2. retention -------------------------------------------------------------------------------------
def test_retention_leaves_a_row_redriven_while_it_waited_whole(
    repo: OutboxRepository, dsn: DatabaseDsn
) -> None:
    set_clock(repo, db_now(repo) - timedelta(days=40))
    nid = f"late-{token()}"
    attempt_id = repo.enqueue_message(nid, whole_message("r@example.com", "c@example.com")).attempt_id
    assert attempt_id is not None
    repo.finalize_failure(
        attempt_id, claim(repo, attempt_id), permanent=True, error_code="X", error_message="x",
        retry_delay_seconds=0,
    )  # fmt: skip
    set_clock(repo, None)
    events_before = len(repo.events(attempt_id))
    holder = OutboxRepository.open(dsn)
    runner = OutboxRepository.open(dsn)
    try:
        runner_id = scalar(runner, "SELECT CONNECTION_ID()")
        holder.connection.start_transaction()
        assert holder.redrive_failed(nid, "ops", "fixed") == 1  # row locked, Pending, not yet committed
        outcome: list[object] = []

        def run() -> None:
            try:
                outcome.append(runner.retention(30, None, 1000, "retention-test"))
            except Exception as exc:  # shown by the assertion below
                outcome.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        # Blocked on the row lock (inside the procedure: the statement shown is the one waiting).
        wait_until(
            lambda: scalar(repo, "SELECT COUNT(*) FROM information_schema.processlist"
                                 " WHERE id = %s AND info IS NOT NULL AND time >= 1", (runner_id,)) > 0,
            8, "retention waiting on the redriven row",
        )  # fmt: skip
        holder.connection.commit()
        thread.join(20)
        assert outcome and not thread.is_alive()
    finally:
        holder.close()
        runner.close()
    row = repo.get_row(attempt_id)
    assert row.status is Status.PENDING
    assert len(repo.attachments_of(attempt_id)) == 1
    assert len(repo.events(attempt_id)) == events_before + 1
    assert scalar(repo, "SELECT COUNT(*) FROM email_notification_tombstones") == 0


def test_retention_keeps_ids_at_least_30_days(repo: OutboxRepository) -> None:
    for keep in (0, 3, 29):
        with pytest.raises(InvalidArgument, match="keep_ids_days"):
            repo.retention(0, keep, 100, "retention-test")
    assert repo.retention(0, 30, 100, "retention-test").deleted == 0


# --- 3. redrive of rows whose content is gone ----------------------------------------------------------
def failed_whole(repo: OutboxRepository, to: str) -> tuple[int, str]:
    nid = f"gone-{token()}"
    attempt_id = repo.enqueue_message(nid, whole_message(to, "c@example.com")).attempt_id
    assert attempt_id is not None
    repo.finalize_failure(
        attempt_id, claim(repo, attempt_id), permanent=True, error_code="X", error_message="x",
        retry_delay_seconds=0,
    )  # fmt: skip
    return attempt_id, nid


def test_redrive_refuses_erased_purged_and_attachment_less_rows_with_the_reason(
    repo: OutboxRepository,
) -> None:
    erased, erased_nid = failed_whole(repo, "gone@example.com")
    assert repo.erase_address("gone@example.com", "dpo", "request 3").erased == 1
    purged, purged_nid = failed_whole(repo, "purged@example.com")
    assert repo.purge_bodies_after(0, purged - 1, 1)[0] == 1
    bare, bare_nid = failed_whole(repo, "bare@example.com")
    repo.connection.cursor().execute("DELETE FROM email_attachments WHERE attempt_id = %s", (bare,))
    for nid, reason in ((erased_nid, "erased"), (purged_nid, "bodies"), (bare_nid, "attachment")):
        with pytest.raises(InvalidInput, match=reason) as refused:
            repo.redrive_failed(nid, "ops", "try again")
        assert refused.value.errno == 45009
    for attempt_id in (erased, purged, bare):
        assert repo.get_row(attempt_id).status is Status.FAILED
    since = db_now(repo) - timedelta(hours=1)
    batch = repo.redrive_failed_batch(
        since, None, None, 0, 100, dry_run=False, redriven_by="ops", reason="bulk"
    )
    assert batch.affected == 0
    _, kept_nid = failed_whole(repo, "kept@example.com")
    assert repo.redrive_failed(kept_nid, "ops", "fine") == 1


# --- 5. bounds on what a worker may set ------------------------------------------------------------------
def test_the_breaker_probe_delay_is_at_most_an_hour(repo: OutboxRepository) -> None:
    with pytest.raises(InvalidArgument, match="probe_after_seconds"):
        repo.breaker_open("ses", "w", "X", "x", 86400)
    assert repo.breaker_state("ses").state == "closed"
    assert repo.breaker_open("ses", "w", "X", "x", 3600) == 1


@pytest.mark.parametrize(
    ("rate", "pace", "daily"),
    [(1_000_000.0, 900_000.0, 50_000), (14.0, 13.0, 0), (14.0, 13.0, 10**12)],
)
def test_send_rate_reports_outside_what_ses_grants_are_refused(
    repo: OutboxRepository, rate: float, pace: float, daily: int
) -> None:
    with pytest.raises(InvalidArgument):
        repo.send_rate_report("w", rate, "ses", pace, daily, "ses", 0)


# --- 7. headers and display names ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    ["Authentication-Results", "ARC-Seal", "arc-message-signature", "ARC-Authentication-Results",
     "Disposition-Notification-To", "Return-Receipt-To", "Received-SPF", "DKIM-Foo", "Errors-To"],
)  # fmt: skip
def test_headers_that_carry_a_verdict_or_ask_for_receipts_are_refused(
    repo: OutboxRepository, name: str
) -> None:
    message = {"to": ["a@example.com"], "subject": "s", "text": "t", "headers": {name: "x"}}
    with pytest.raises(InvalidHeader, match=name):
        repo.enqueue_message(token(), json.dumps(message))


@pytest.mark.parametrize(
    "mailbox", ["security@paypal.com <shop@example.com>", '"help@bank.example" <a@example.com>']
)
def test_a_display_name_that_is_an_address_is_refused(repo: OutboxRepository, mailbox: str) -> None:
    with pytest.raises(InvalidAddress, match="display name"):
        repo.enqueue_message(token(), json.dumps({"to": [mailbox], "subject": "s", "text": "t"}))


# --- 8. non-ASCII recipients ------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["to", "cc", "bcc", "reply_to"])
def test_a_non_ascii_local_part_is_refused_at_enqueue(repo: OutboxRepository, field: str) -> None:
    message = {"to": ["a@example.com"], "subject": "s", "text": "t"}
    message[field] = ["Jösé <jösé@exämple.com>"]
    with pytest.raises(InvalidAddress, match="local part"):
        repo.enqueue_message(token(), json.dumps(message, ensure_ascii=False))
    with pytest.raises(InvalidAddress, match="local part"):
        repo.enqueue(token(), "jösé@example.com", "s", text_body="t")
    # A non-ASCII domain is fine: the worker sends it as Punycode.
    assert repo.enqueue(token(), "jose@exämple.com", "s", text_body="t").affected == 1


# --- 9. the Python API checks SES's size limit before sending ----------------------------------------
def test_enqueue_message_refuses_a_message_over_40_mb_before_sending_it(repo: OutboxRepository) -> None:
    from email_outbox import Attachment, Message, enqueue_message
    from email_outbox.errors import MessageTooLarge

    big = Message(to=["a@example.com"], subject="s", text="t",
                  attachments=[Attachment("a.bin", "application/octet-stream", b"\0" * (31 * 1024 * 1024))])  # fmt: skip
    received = (
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'BYTES_RECEIVED'"
    )
    before = int(scalar(repo, received))
    with pytest.raises(MessageTooLarge, match="40 MB"):
        enqueue_message(repo.connection, "too-big", big)
    assert int(scalar(repo, received)) - before < 1_000_000


# --- 6. tombstones keyed -------------------------------------------------------------------------------
def test_a_tombstone_is_keyed_so_a_guessed_id_does_not_match_it(repo: OutboxRepository) -> None:
    guessed = "welcome:ann@example.com"
    set_clock(repo, db_now(repo) - timedelta(days=40))
    attempt_id = repo.enqueue(guessed, "ann@example.com", "s", text_body="t").attempt_id
    assert attempt_id is not None and repo.finalize_sent(attempt_id, claim(repo, attempt_id), "ses-1") == 1
    set_clock(repo, None)
    assert repo.retention(30, None, 1000, "retention-test").deleted == 1
    (id_hash,) = [bytes(r[0]) for r in rows(repo, "SELECT id_hash FROM email_notification_tombstones")]
    assert id_hash != hashlib.sha256(guessed.encode()).digest(), "a plain hash: a guess confirms it"
    secret = bytes(scalar(repo, "SELECT secret FROM email_outbox_keys ORDER BY id DESC LIMIT 1"))
    assert id_hash == hmac.new(secret, b"notification_id:" + guessed.encode(), hashlib.sha256).digest()
    assert repo.enqueue(guessed, "ann@example.com", "s", text_body="t").attempt_id is None, (
        "still a duplicate"
    )
    # A tombstone written before, a plain SHA-256, still answers while it lasts.
    repo.connection.cursor().execute(
        "INSERT INTO email_notification_tombstones (account, id_hash, deleted_on, keep_until)"
        " VALUES ('', UNHEX(SHA2('older-id', 256)), UTC_DATE(), UTC_DATE() + INTERVAL 10 DAY)"
    )
    assert repo.enqueue("older-id", "ann@example.com", "s", text_body="t").attempt_id is None
