"""Retention, tombstones and erasure (issue 28) against a real server: email_retention deletes old
Sent and Failed rows with everything stored for them and nothing else, in batches, logged; a deleted
row's notification id stays a duplicate for the dedupe window and no longer; email_erase_address
leaves no trace of an address in any column of any table while it stays suppressed, and leaves a row
being sent alone; only the maintenance and operator roles may run either."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
from datetime import UTC, timedelta
from pathlib import Path

import mysql.connector
import pytest

from email_outbox.changes import read_changes
from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import AccessDenied, InvalidInput
from email_outbox.models import RetentionBatch, Status
from tests.conftest import TestServer, db_now, set_clock
from tests.support.accounts import granted_account
from tests.support.helpers import scalar, token
from tests.support.history import (
    claim,
    days_ago,
    make_history,
    orphans,
    record_event,
    references,
    rows,
    where_text_appears,
    whole_message,
)
from tests.support.worker_harness import wait_until

# What the outbox stores for a row besides the row (more may be added; `orphans` finds every table).
DEPENDENT_TABLES = (
    "email_delivery_events",
    "email_attachments",
    "email_provider_events",
    "email_delivery_status",
    "email_suppressed_addresses",
    "email_changes_feed",
)


def run_retention(
    repo: OutboxRepository, older_than_days: int, keep_ids_days: int | None = None, batch_size: int = 1000
) -> list[RetentionBatch]:
    batches = []
    while True:
        batches.append(repo.retention(older_than_days, keep_ids_days, batch_size, "retention-test"))
        if not batches[-1].more:
            return batches


def row_count(repo: OutboxRepository) -> int:
    return int(scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts"))


# --- retention -------------------------------------------------------------------------------------
def test_retention_deletes_old_terminal_rows_with_everything_stored_for_them_in_batches(
    repo: OutboxRepository,
) -> None:
    old = make_history(repo, days_ago(repo, 40), "old")
    # Created 40 days ago but failed for good only 10 days ago: its final transition is recent.
    forty, ten = days_ago(repo, 40), days_ago(repo, 10)
    set_clock(repo, forty)
    late = repo.enqueue("late-failure", "late@example.com", "late", text_body="x").attempt_id
    assert late is not None
    repo.finalize_failure(
        late,
        claim(repo, late),
        permanent=False,
        error_code="Throttling",
        error_message="x",
        retry_delay_seconds=0,
    )
    set_clock(repo, ten)
    repo.finalize_failure(
        late,
        claim(repo, late),
        permanent=True,
        error_code="Rejected",
        error_message="x",
        retry_delay_seconds=0,
    )
    set_clock(repo, None)
    young = make_history(repo, days_ago(repo, 0), "young")
    read_changes(repo.connection, 0, 1)  # gives the events their feed positions
    for attempt_id in old.terminal():
        assert any(references(repo, attempt_id).values())
    stored = references(repo, old.sent)
    for table in DEPENDENT_TABLES:
        assert stored[table] > 0, table

    batches = run_retention(repo, 30, batch_size=2)

    assert all(b.deleted <= 2 for b in batches)
    assert sum(b.deleted for b in batches) == 2
    remaining = {r[0] for r in rows(repo, "SELECT id FROM email_delivery_attempts")}
    assert remaining.isdisjoint(old.terminal())
    assert set(old.kept()) | {late} | set(young.terminal()) | set(young.kept()) <= remaining
    assert repo.get_row(old.unknown).status is Status.UNKNOWN_OUTCOME, "UnknownOutcome still needs a person"
    assert orphans(repo) == {t: 0 for t in orphans(repo)}
    for attempt_id in old.terminal():
        assert not any(references(repo, attempt_id).values())
    # The bounced cc stays suppressed; only its pointer to the deleted email went.
    ((entry_attempt,),) = rows(
        repo, "SELECT attempt_id FROM email_suppressed_addresses WHERE address = %s", (old.cc_address,)
    )
    assert entry_attempt is None
    again = repo.enqueue(token(), old.cc_address, "hello again", text_body="x").attempt_id
    assert again is not None and repo.get_row(again).last_error_code == "Suppressed"

    ((actor, account, cutoff, deleted, batch_count, finished, started),) = rows(
        repo,
        "SELECT actor, db_account, cutoff, deleted_rows, batches, finished_at, started_at FROM email_retention_runs",
    )
    assert (actor, deleted, batch_count) == ("retention-test", 2, len(batches))
    assert account and finished is not None
    assert abs((started - timedelta(days=30)) - cutoff) < timedelta(seconds=1)
    assert {b.run_id for b in batches} == {batches[0].run_id}, "one run for the session"


def test_a_provider_event_recorded_just_after_its_row_was_deleted_goes_with_the_next_run(
    repo: OutboxRepository,
) -> None:
    set_clock(repo, days_ago(repo, 40))
    attempt_id = repo.enqueue("order-5", "ann@example.com", "Order 5", text_body="x").attempt_id
    assert attempt_id is not None
    assert repo.finalize_sent(attempt_id, claim(repo, attempt_id), "m-5") == 1
    set_clock(repo, None)
    run_retention(repo, 30)
    # What the consumer writes when it matched the row just before the delete and records just after.
    cursor = repo.connection.cursor()
    cursor.execute(
        "INSERT INTO email_provider_events (event_key, attempt_id, event_type, ses_message_id, recipient,"
        " event_at, recorded_at, recorded_by) VALUES (UNHEX(SHA2('late', 256)), %s, 'Complaint', 'm-5',"
        " 'ann@example.com', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'test')",
        (attempt_id,),
    )
    cursor.execute(
        "INSERT INTO email_delivery_status (attempt_id, state, state_at, state_order, ses_message_id, updated_at)"
        " VALUES (%s, 'complained', UTC_TIMESTAMP(6), 1, 'm-5', UTC_TIMESTAMP(6))",
        (attempt_id,),
    )
    cursor.close()
    assert orphans(repo)["email_provider_events"] == 1
    run_retention(repo, 30)
    assert orphans(repo) == {t: 0 for t in orphans(repo)}


def test_the_documented_mysql_event_runs_retention_to_the_end(
    server: TestServer, repo: OutboxRepository
) -> None:
    """docs/operations.md's EVENT, verbatim but for its schedule: the procedure does one batch per call
    and the event loops in its session until the run is finished."""
    text = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    body = re.search(
        r"CREATE EVENT email_outbox_retention ON SCHEDULE EVERY 1 DAY STARTS '[^']+'\n(DO BEGIN.*?END);",
        text,
        re.S,
    )
    assert body, "the EVENT example in docs/operations.md"
    set_clock(repo, days_ago(repo, 100))
    ids = [repo.enqueue(f"old-{i}", "ann@example.com", "old", text_body="x").attempt_id for i in range(5)]
    for attempt_id in ids:
        assert (
            attempt_id is not None
            and repo.finalize_sent(attempt_id, claim(repo, attempt_id), f"m-{attempt_id}") == 1
        )
    set_clock(repo, None)
    admin = server.admin_connection(repo.connection.database)
    cursor = admin.cursor()
    cursor.execute("SELECT @@GLOBAL.event_scheduler")
    ((scheduler,),) = cursor.fetchall()
    try:
        cursor.execute(
            "CREATE EVENT email_outbox_retention ON SCHEDULE AT CURRENT_TIMESTAMP " + body.group(1)
        )
        cursor.execute("SET GLOBAL event_scheduler = ON")
        wait_until(
            lambda: bool(rows(repo, "SELECT 1 FROM email_retention_runs WHERE finished_at IS NOT NULL")),
            30,
            "the event's run to finish",
        )
    finally:
        cursor.execute(f"SET GLOBAL event_scheduler = {scheduler}")
        cursor.execute("DROP EVENT IF EXISTS email_outbox_retention")
        admin.close()
    assert rows(repo, "SELECT actor, deleted_rows FROM email_retention_runs") == [("mysql-event", 5)]
    assert row_count(repo) == 0


def test_retention_checks_its_arguments(repo: OutboxRepository) -> None:
    for older, keep, batch in (
        (-1, None, 10),
        (30, 29, 10),
        (30, None, 0),
        (30, None, 1001),
        (30, 40000, 10),
    ):
        with pytest.raises(InvalidInput):
            repo.retention(older, keep, batch, "test")
    with pytest.raises(InvalidInput, match="actor"):
        repo.retention(30, None, 10, " ")
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_retention_runs")) == 0


def test_a_deleted_ids_enqueue_is_a_duplicate_within_the_window_and_new_after_it(
    repo: OutboxRepository,
) -> None:
    set_clock(repo, days_ago(repo, 35))
    plain = repo.enqueue("order-1", "ann@example.com", "Order 1", text_body="x").attempt_id
    whole = repo.enqueue_message("order-2", whole_message("bob@example.com", "carl@example.com")).attempt_id
    assert plain is not None and whole is not None
    assert repo.finalize_sent(plain, claim(repo, plain), "m-1") == 1
    assert repo.finalize_sent(whole, claim(repo, whole), "m-2") == 1
    set_clock(repo, None)

    assert sum(b.deleted for b in run_retention(repo, 30, keep_ids_days=40)) == 2
    # Compact: the enqueuing account (ids are per account), a keyed hash of the id and two dates; never
    # the id (the key: tests/contract/test_review_3.py).
    account = scalar(repo, "SELECT SUBSTRING_INDEX(SESSION_USER(), '@', 1)")
    secret = bytes(scalar(repo, "SELECT secret FROM email_outbox_keys ORDER BY id DESC LIMIT 1"))
    assert sorted(rows(repo, "SELECT account, id_hash FROM email_notification_tombstones")) == sorted(
        (account, hmac.new(secret, b"notification_id:" + n.encode(), hashlib.sha256).digest())
        for n in ("order-1", "order-2")
    )
    assert where_text_appears(repo, "order-1") == []

    events_before = int(scalar(repo, "SELECT COUNT(*) FROM email_delivery_events"))
    duplicate = repo.enqueue("order-1", "ann@example.com", "Order 1", text_body="x")
    assert (duplicate.affected, duplicate.attempt_id) == (0, None)
    duplicate = repo.enqueue_message("order-2", whole_message("bob@example.com", "carl@example.com"))
    assert (duplicate.affected, duplicate.attempt_id) == (0, None)
    assert row_count(repo) == 0
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_attachments")) == 0
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_delivery_events")) == events_before
    # The ids are exact, as the unique key is: another id, even one differing only in case, is new.
    assert repo.enqueue("Order-1", "ann@example.com", "Order 1", text_body="x").affected == 1

    # Final 35 days ago, kept 40: the window closes in 5 days. Six days on, the id is new again and
    # retention drops the expired tombstones.
    set_clock(repo, db_now(repo) + timedelta(days=6))
    expired = run_retention(repo, 30, keep_ids_days=40)
    assert sum(b.tombstones_expired for b in expired) == 2
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_notification_tombstones")) == 0
    after = repo.enqueue("order-1", "ann@example.com", "Order 1", text_body="x")
    assert after.affected == 1 and after.attempt_id is not None
    set_clock(repo, None)


def test_an_expired_tombstone_no_longer_counts_even_before_retention_drops_it(repo: OutboxRepository) -> None:
    set_clock(repo, days_ago(repo, 35))
    attempt_id = repo.enqueue("order-9", "ann@example.com", "Order 9", text_body="x").attempt_id
    assert attempt_id is not None
    assert repo.finalize_sent(attempt_id, claim(repo, attempt_id), "m-9") == 1
    set_clock(repo, None)
    run_retention(repo, 30, keep_ids_days=36)
    assert repo.enqueue("order-9", "ann@example.com", "Order 9", text_body="x").affected == 0
    set_clock(repo, db_now(repo) + timedelta(days=2))
    assert repo.enqueue("order-9", "ann@example.com", "Order 9", text_body="x").affected == 1
    set_clock(repo, None)


def test_an_enqueue_in_a_transaction_older_than_the_delete_still_sees_the_tombstone(
    repo: OutboxRepository, open_repo: object
) -> None:
    """The tombstone check is a locking read after the insert: a caller whose snapshot predates the
    retention commit must not get a second row for the same id."""
    set_clock(repo, days_ago(repo, 35))
    attempt_id = repo.enqueue("order-7", "ann@example.com", "Order 7", text_body="x").attempt_id
    assert attempt_id is not None
    assert repo.finalize_sent(attempt_id, claim(repo, attempt_id), "m-7") == 1
    set_clock(repo, None)
    app = open_repo()  # type: ignore[operator]
    with app.transaction():
        assert int(scalar(app, "SELECT COUNT(*) FROM email_delivery_attempts")) == 1  # the snapshot
        run_retention(repo, 30)
        duplicate = app.enqueue("order-7", "ann@example.com", "Order 7", text_body="x")
    assert (duplicate.affected, duplicate.attempt_id) == (0, None)
    assert row_count(repo) == 0


def test_a_tombstone_answers_for_its_own_account_only(
    server: TestServer, dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    """Notification ids are per enqueuing account (migration 0010), and so are tombstones: after
    retention, the id stays a duplicate for the account that enqueued it and is a new email for another."""
    set_clock(repo, days_ago(repo, 35))
    attempt_id = repo.enqueue("order-11", "ann@example.com", "Order 11", text_body="x").attempt_id
    assert attempt_id is not None
    assert repo.finalize_sent(attempt_id, claim(repo, attempt_id), "m-11") == 1
    set_clock(repo, None)
    run_retention(repo, 30)
    assert repo.enqueue("order-11", "ann@example.com", "Order 11", text_body="x").affected == 0
    with granted_account(server, dsn, "enqueuer") as account:
        other = OutboxRepository.open(account)
        try:
            result = other.enqueue("order-11", "ann@example.com", "Order 11", text_body="x")
        finally:
            other.close()
    assert result.affected == 1 and result.attempt_id is not None


# --- erasure ---------------------------------------------------------------------------------------
ERASED = "Erased.Person@Example.org"


def fill_traces_of(repo: OutboxRepository, address: str) -> dict[str, int]:
    """The address as to (Sent, with provider events and a bounce that suppresses it), as a cc of a
    still-Pending whole message, as a bcc, as a reply-to, in an UnknownOutcome row, in a notification
    id, in the suppression log; and a row to someone else that must stay whole."""
    ids: dict[str, int] = {}

    def enqueued(notification_id: str, to: str) -> int:
        attempt_id = repo.enqueue(notification_id, to, f"Hello {to}", text_body=f"Hi {to}").attempt_id
        assert attempt_id is not None
        return attempt_id

    ids["sent"] = enqueued(token(), address)
    message_id = f"ses-{token()}"
    assert repo.finalize_sent(ids["sent"], claim(repo, ids["sent"]), message_id) == 1
    now = db_now(repo)
    record_event(repo, "Delivery", message_id, ids["sent"], address.lower(), now)
    record_event(repo, "Bounce", message_id, ids["sent"], address.lower(), now, kind="Permanent")
    assert repo.suppression_remove(address.lower(), "ops", "test: re-add by hand") == 1
    assert repo.suppression_add(address.upper(), "ops", "asked to stop") == 1
    ids["cc"] = (
        repo.enqueue_message(token(), whole_message("bob@example.com", address.swapcase())).attempt_id or 0
    )
    doc = whole_message("bob@example.com", "carl@example.com").replace("archive@example.com", address)
    ids["bcc"] = repo.enqueue_message(token(), doc).attempt_id or 0
    doc = whole_message("bob@example.com", "carl@example.com").replace("help@example.com", address)
    ids["reply_to"] = repo.enqueue_message(token(), doc).attempt_id or 0
    ids["unknown"] = enqueued(token(), address.lower())
    assert repo.finalize_unknown(ids["unknown"], claim(repo, ids["unknown"]), "read timeout") == 1
    ids["id_names_it"] = enqueued(f"welcome-{address.lower()}", address.lower())
    ids["other"] = enqueued(token(), f"jo{address.lower()}")  # a longer address that contains it
    assert all(ids.values())
    return ids


def test_erasure_leaves_no_trace_in_any_column_of_any_table_and_the_address_stays_suppressed(
    repo: OutboxRepository,
) -> None:
    ids = fill_traces_of(repo, ERASED)
    assert where_text_appears(repo, ERASED) != []

    result = repo.erase_address(ERASED.lower(), "dpo", "ticket GDPR-17")

    assert (result.erased, result.processing, result.suppression_entries) == (6, 0, 1)
    assert result.provider_events == 2
    # An address that merely contains it is someone else's: untouched. (Its row then leaves the table,
    # or the scan below, which looks for the text anywhere, would count it.)
    assert repo.get_row(ids.pop("other")).to_address == f"jo{ERASED.lower()}"
    cursor = repo.connection.cursor()
    cursor.execute("DELETE FROM email_delivery_attempts WHERE to_address LIKE 'jo%%'")
    cursor.close()
    assert where_text_appears(repo, ERASED) == []
    for name, attempt_id in ids.items():
        row = repo.get_row(attempt_id)
        assert (row.to_address, row.subject, row.message_options) == ("", "", None), name
        assert rows(
            repo, "SELECT text_body, html_body FROM email_delivery_attempts WHERE id = %s", (attempt_id,)
        ) == [(None, None)]
        assert repo.events(attempt_id)[-1].detail == "erased: ticket GDPR-17"
    assert (
        repo.get_row(ids["cc"]).status is Status.FAILED
        and repo.get_row(ids["cc"]).last_error_code == "Erased"
    )
    assert repo.get_row(ids["sent"]).status is Status.SENT, "an accounting record stays"
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_attachments")) == 0
    ((hashed, actor, reason, erased_rows),) = rows(
        repo, "SELECT address_hash, actor, reason, rows_erased FROM email_erasures"
    )
    assert (actor, reason, erased_rows) == ("dpo", "ticket GDPR-17", 6) and hashed.startswith("#")

    # Still suppressed, in any spelling: a new email to it is never sent, as to, cc or bcc.
    for spelling in (ERASED, ERASED.lower(), ERASED.upper()):
        attempt_id = repo.enqueue(token(), spelling, "are you there?", text_body="x").attempt_id
        assert attempt_id is not None and repo.get_row(attempt_id).last_error_code == "Suppressed", spelling
    kept = repo.enqueue_message(token(), whole_message("bob@example.com", ERASED)).attempt_id
    assert kept is not None
    assert json.loads(repo.get_row(kept).message_options or "{}")["cc"] == [], "left out as suppressed"
    # A bounce recorded later does not put it back in clear; an operator can still lift it.
    assert repo.suppression_add(ERASED, "ops", "again") == 0
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_suppressed_addresses")) == 1
    assert repo.suppression_remove(ERASED, "ops", "asked to hear from us again") == 1
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_suppressed_addresses")) == 0


def test_erasure_refuses_a_reason_that_names_the_address(repo: OutboxRepository) -> None:
    with pytest.raises(InvalidInput, match="must not contain the address"):
        repo.erase_address("ann@example.com", "dpo", "erase ANN@example.com please")
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_erasures")) == 0


def test_erasure_leaves_a_row_being_sent_alone_and_a_rerun_finishes(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    done = repo.enqueue(token(), ERASED, "one", text_body="x").attempt_id
    sending = repo.enqueue(token(), ERASED, "two", text_body="x").attempt_id
    assert done is not None and sending is not None
    assert repo.finalize_sent(done, claim(repo, done), "m-1") == 1
    claim_token = claim(repo, sending)

    assert main(["erase", "--dsn", dsn.url(), "--address", ERASED, "--by", "dpo", "--reason", "GDPR-18"]) == 3
    out, err = capsys.readouterr()
    assert "erased 1 emails" in out and "1 emails to this address are being sent" in err
    row = repo.get_row(sending)
    assert (row.status, row.to_address, row.subject) == (Status.PROCESSING, ERASED, "two"), "not touched"
    assert repo.claimed_bodies(sending, claim_token) == ("x", None), "the worker can still send it"

    assert repo.finalize_sent(sending, claim_token, "m-2") == 1
    assert main(["erase", "--dsn", dsn.url(), "--address", ERASED, "--by", "dpo", "--reason", "GDPR-18"]) == 0
    assert "erased 1 emails" in capsys.readouterr().out
    assert where_text_appears(repo, ERASED) == []


# --- roles -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("role", ["maintenance", "operator"])
def test_maintenance_and_operator_may_run_retention_and_erasure(
    server: TestServer, dsn: DatabaseDsn, repo: OutboxRepository, role: str
) -> None:
    set_clock(repo, days_ago(repo, 40))
    attempt_id = repo.enqueue("old", "ann@example.com", "old", text_body="x").attempt_id
    assert attempt_id is not None and repo.finalize_sent(attempt_id, claim(repo, attempt_id), "m") == 1
    set_clock(repo, None)
    with granted_account(server, dsn, role) as account:
        granted = OutboxRepository.open(account)
        try:
            assert granted.retention(30, None, 1000, "cron").deleted == 1
            assert granted.erase_address("bob@example.com", "dpo", "GDPR-19").erased == 0
        finally:
            granted.close()
    ((db_account,),) = rows(repo, "SELECT db_account FROM email_retention_runs")
    assert str(db_account).startswith(f"eo_{role}@")


@pytest.mark.parametrize("role", ["enqueuer", "worker", "events", "console", "viewer"])
def test_other_roles_may_not_run_retention_or_erasure(
    server: TestServer, dsn: DatabaseDsn, repo: OutboxRepository, role: str
) -> None:
    with granted_account(server, dsn, role) as account:
        granted = OutboxRepository.open(account)
        try:
            with pytest.raises(AccessDenied):
                granted.retention(30, None, 1000, "cron")
            with pytest.raises(AccessDenied):
                granted.erase_address("bob@example.com", "dpo", "GDPR-20")
        finally:
            granted.close()
        conn = mysql.connector.connect(**account.connect_args())
        try:
            with pytest.raises(mysql.connector.Error):
                conn.cursor().execute("SELECT * FROM email_outbox_keys")
        finally:
            conn.close()
    assert int(scalar(repo, "SELECT COUNT(*) FROM email_retention_runs")) == 0


def test_last_run_says_when_retention_last_finished_and_the_workers_gauge_shows_it(
    repo: OutboxRepository,
) -> None:
    from email_outbox.worker.metrics import QueueSampler, _queue_metrics

    never = repo.retention_last_run()
    assert never.last_finished_at is None and never.last_started_at is None
    # A run left unfinished (its batch said `more`) has started but not finished.
    for n in range(2):
        make_history(repo, days_ago(repo, 40), f"last-run-{n}")
    first = repo.retention(30, None, 1, "retention-test")
    assert first.more
    started = repo.retention_last_run()
    assert started.last_started_at is not None and started.last_finished_at is None
    run_retention(repo, 30)
    done = repo.retention_last_run()
    assert done.last_finished_at is not None
    assert abs((done.database_now - done.last_finished_at).total_seconds()) < 60

    sampler = QueueSampler(lambda: repo, 60, threading.Event())
    sampler.sample(repo)
    gauges = {m.name: m.samples[0].value for m in _queue_metrics(sampler.latest, 0.0) if m.samples}
    expected = done.last_finished_at.replace(tzinfo=UTC).timestamp()
    assert gauges["email_outbox_retention_last_finished_timestamp_seconds"] == pytest.approx(expected)
