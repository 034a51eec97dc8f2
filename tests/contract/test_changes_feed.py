"""email_changes, the feed of what happened: an account reads its own emails' status changes and SES
events in order, and nothing of another account's; a consumer resuming from its last cursor misses
nothing and sees nothing twice, also when writers commit out of id order, as they genuinely do when
several enqueue in transactions at once."""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import mysql.connector
import pytest

from email_outbox import Message, enqueue_message
from email_outbox.changes import Change, changes, read_changes
from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidArgument
from tests.support.helpers import token
from tests.support.worker_harness import wait_until

MESSAGE = Message(to=["ann@example.com"], subject="s", text="t")


def connect(dsn: DatabaseDsn, autocommit: bool = True) -> mysql.connector.MySQLConnection:
    return mysql.connector.connect(**dsn.connect_args(), autocommit=autocommit)  # type: ignore[return-value]


@pytest.fixture
def enqueuer(accounts: dict[str, DatabaseDsn]) -> Iterator[mysql.connector.MySQLConnection]:
    conn = connect(accounts["enqueuer"])
    yield conn
    conn.close()


def send_and_bounce(repo: OutboxRepository, attempt_id: int, recipient: str = "ann@example.com") -> None:
    """The worker's part and SES's: claim, Sent, then a permanent bounce."""
    claim = token()
    assert repo.try_claim(attempt_id, claim, "test", 60) == 1
    assert repo.finalize_sent(attempt_id, claim, f"ses-{attempt_id}") == 1
    recorded = repo.record_provider_event(
        event_type="Bounce", ses_message_id=f"ses-{attempt_id}", outbox_id=str(attempt_id),
        recipient=recipient, event_at=datetime.now(UTC).replace(tzinfo=None),
        kind="Permanent", subkind="General", detail=None, recorded_by="test",
    )  # fmt: skip
    assert recorded.affected == 1


def test_an_account_reads_its_own_changes_in_order_and_nothing_of_anothers(
    accounts: dict[str, DatabaseDsn], enqueuer: mysql.connector.MySQLConnection, repo: OutboxRepository
) -> None:
    mine = enqueue_message(enqueuer, "order-1", MESSAGE).attempt_id
    other = connect(accounts["operator"])
    theirs = enqueue_message(
        other, "order-1", Message(to=["bob@example.com"], subject="s", text="t")
    ).attempt_id
    assert mine is not None and theirs is not None
    send_and_bounce(repo, mine)
    send_and_bounce(repo, theirs, "bob@example.com")

    seen = list(changes(enqueuer))
    assert {c.attempt_id for c in seen} == {mine}, "another account's email is not in this feed"
    assert [(c.change, c.from_status, c.to_status, c.event_type) for c in seen] == [
        ("status", None, "Pending", None),
        ("status", "Pending", "Processing", None),
        ("status", "Processing", "Sent", None),
        ("provider", None, None, "Bounce"),
    ]
    bounce = seen[-1]
    assert (bounce.notification_id, bounce.recipient, bounce.kind) == (
        "order-1",
        "ann@example.com",
        "Permanent",
    )
    assert [c.cursor for c in seen] == sorted({c.cursor for c in seen})
    assert [c.attempt_id for c in changes(other)] == [theirs] * 4
    other.close()

    page = read_changes(enqueuer, seen[1].cursor, 2)
    assert [c.cursor for c in page.changes] == [seen[2].cursor, seen[3].cursor]
    assert page.next_cursor == seen[3].cursor
    assert read_changes(enqueuer, page.next_cursor, 10).changes == []


def test_bad_arguments_are_refused_with_invalid_argument(enqueuer: mysql.connector.MySQLConnection) -> None:
    enqueue_message(enqueuer, "n-1", MESSAGE)
    for after, rows in ((0, 0), (0, 1001), (-1, 10), (10**12, 10)):
        with pytest.raises(InvalidArgument) as refused:
            read_changes(enqueuer, after, rows)
        assert refused.value.errno == 45001


def test_an_event_committed_after_a_later_one_is_still_read_after_the_cursor_passed_it(
    enqueuer: mysql.connector.MySQLConnection, accounts: dict[str, DatabaseDsn]
) -> None:
    late = connect(accounts["enqueuer"], autocommit=False)
    try:
        late_id = enqueue_message(late, "late", MESSAGE).attempt_id  # its event's id is taken, not committed
        early_id = enqueue_message(enqueuer, "early", MESSAGE).attempt_id  # a later id, committed first
        assert late_id is not None and early_id is not None and late_id < early_id
        first = read_changes(enqueuer, 0, 100)
        assert [c.attempt_id for c in first.changes] == [early_id]
        late.commit()
    finally:
        late.close()
    second = read_changes(enqueuer, first.next_cursor, 100)
    assert [c.attempt_id for c in second.changes] == [late_id], "an id-ordered cursor would have skipped it"


def test_a_consumer_resuming_from_its_cursor_under_concurrent_writers_misses_nothing_and_sees_nothing_twice(
    accounts: dict[str, DatabaseDsn], enqueuer: mysql.connector.MySQLConnection
) -> None:
    writers, per_writer = 4, 40
    committed: list[int] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    done = threading.Event()

    def write(seed: int) -> None:
        rng = random.Random(seed)
        conn = connect(accounts["enqueuer"], autocommit=False)
        try:
            for i in range(per_writer):
                attempt_id = enqueue_message(conn, f"w{seed}-{i}", MESSAGE).attempt_id
                # Hold the transaction open a moment so other writers' later ids commit first.
                threading.Event().wait(rng.random() * 0.01)
                if rng.random() < 0.2:
                    conn.rollback()
                    continue
                conn.commit()
                with lock:
                    committed.append(int(attempt_id or 0))
        except BaseException as exc:
            errors.append(exc)
        finally:
            conn.close()

    seen: list[Change] = []
    cursor = 0

    def read_until_done() -> None:
        nonlocal cursor
        # A consumer that stops after every page and resumes from the cursor it saved.
        reader = connect(accounts["enqueuer"])
        try:
            while True:
                finished = done.is_set()
                page = read_changes(reader, cursor, 7)
                seen.extend(page.changes)
                cursor = page.next_cursor
                if finished and not page.more and not page.changes:
                    return
        finally:
            reader.close()

    threads = [threading.Thread(target=write, args=(seed,)) for seed in range(writers)]
    consumer = threading.Thread(target=read_until_done)
    consumer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    consumer.join(120)
    assert not errors, errors
    assert not consumer.is_alive()

    cursors = [c.cursor for c in seen]
    assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors), "nothing twice, in order"
    assert sorted(c.attempt_id for c in seen) == sorted(committed), (
        "every committed enqueue, nothing rolled back"
    )
    assert all(c.to_status == "Pending" for c in seen)
    # Out-of-order commits did happen: some change's row id is below one read before it.
    assert any(b.attempt_id < a.attempt_id for a, b in itertools.pairwise(seen))


def test_the_changes_command_prints_one_json_line_per_change_and_resumes_after_a_cursor(
    accounts: dict[str, DatabaseDsn],
    enqueuer: mysql.connector.MySQLConnection,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for n in range(3):
        enqueue_message(enqueuer, f"cli-{n}", MESSAGE)
    dsn = accounts["enqueuer"]
    args = ["changes", "--dsn", dsn.url(), "--max-rows", "2"]
    assert main(args) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["notification_id"] for line in lines] == ["cli-0", "cli-1", "cli-2"]
    assert main([*args, "--after", str(lines[0]["cursor"])]) == 0
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["notification_id"] for line in again] == ["cli-1", "cli-2"]


def test_following_picks_up_a_change_committed_after_it_caught_up(
    accounts: dict[str, DatabaseDsn], enqueuer: mysql.connector.MySQLConnection
) -> None:
    enqueue_message(enqueuer, "before", MESSAGE)
    seen: list[Change] = []
    stop = threading.Event()
    reader = connect(accounts["enqueuer"])

    def collect() -> None:
        for change in changes(reader, follow=True, poll_interval=0.05, stop=stop.is_set):
            seen.append(change)

    thread = threading.Thread(target=collect)
    thread.start()
    try:
        wait_until(lambda: [c.notification_id for c in seen] == ["before"], 30, "the first change")
        enqueue_message(enqueuer, "after", MESSAGE)
        wait_until(lambda: [c.notification_id for c in seen] == ["before", "after"], 30, "the later change")
    finally:
        stop.set()
        thread.join(30)
        reader.close()
    assert not thread.is_alive()


def test_a_consumer_paging_while_retention_deletes_emails_misses_none_that_remain(
    accounts: dict[str, DatabaseDsn], enqueuer: mysql.connector.MySQLConnection, dsn: DatabaseDsn
) -> None:
    """A page's rows and its next cursor come from one window of positions: an email retention deletes
    while a page is read never shifts the window, so the cursor never passes a change not returned."""
    ids = [int(enqueue_message(enqueuer, f"r-{i}", MESSAGE).attempt_id or 0) for i in range(300)]
    doomed = random.Random(7).sample(ids, 150)
    errors: list[BaseException] = []
    deleting = threading.Event()
    deleted = threading.Event()

    def delete_emails() -> None:
        # What email_retention does to an email: its feed rows and events go with it, in one transaction.
        conn = connect(dsn, autocommit=False)
        try:
            deleting.wait(30)
            for attempt_id in doomed:
                cursor = conn.cursor()
                cursor.execute("DELETE FROM email_changes_feed WHERE attempt_id = %s", (attempt_id,))
                cursor.execute("DELETE FROM email_delivery_events WHERE attempt_id = %s", (attempt_id,))
                cursor.execute("DELETE FROM email_delivery_attempts WHERE id = %s", (attempt_id,))
                cursor.close()
                conn.commit()
                threading.Event().wait(0.005)
        except BaseException as exc:
            errors.append(exc)
        finally:
            conn.close()
            deleted.set()

    deleter = threading.Thread(target=delete_emails)
    deleter.start()
    passes: list[set[int]] = []
    reader = connect(accounts["enqueuer"])
    read_changes(reader, 0, 1)  # every change has its position before the deletes start
    deleting.set()
    try:
        while not deleted.is_set():  # passes from the start, each racing the deleter
            seen: set[int] = set()
            cursor = 0
            while True:
                page = read_changes(reader, cursor, 50)
                seen.update(c.attempt_id for c in page.changes)
                cursor = page.next_cursor
                if not page.more and not page.changes:
                    break
            passes.append(seen)
    finally:
        reader.close()
        deleter.join(60)
    assert not errors, errors
    remaining = set(ids) - set(doomed)
    missed = [len(remaining - seen) for seen in passes]
    assert passes and not any(missed), f"changes of emails never deleted missed, per pass: {missed}"
