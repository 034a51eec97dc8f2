"""email_enqueue: idempotent, transaction-safe, refuses bad input without writing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime

import mysql.connector
import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository, connect
from email_outbox.errors import InvalidInput
from email_outbox.models import Status
from tests.support.harness import TestServer
from tests.support.helpers import scalar


def test_new_row_is_pending_with_defaults(repo: OutboxRepository) -> None:
    result = repo.enqueue("order-1", "a@example.com", "Your order", text_body="thanks")
    assert result.affected == 1 and not result.duplicate
    row = repo.get_row(result.attempt_id)
    assert row.status is Status.PENDING
    assert row.max_attempts == 5
    assert row.attempt_count == 0
    assert row.from_address is None
    assert row.next_attempt_at <= row.created_at


def test_duplicate_returns_first_rows_id(repo: OutboxRepository) -> None:
    first = repo.enqueue("order-2", "a@example.com", "s", text_body="one")
    second = repo.enqueue("order-2", "b@example.com", "other", text_body="two")
    assert second.affected == 0 and second.attempt_id == first.attempt_id
    assert repo.get_row(first.attempt_id).to_address == "a@example.com"
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 1


def test_notification_id_is_case_sensitive(repo: OutboxRepository) -> None:
    a = repo.enqueue("Order-3", "a@example.com", "s", text_body="x")
    b = repo.enqueue("order-3", "a@example.com", "s", text_body="x")
    assert a.affected == b.affected == 1 and a.attempt_id != b.attempt_id


def _business_connection(dsn: DatabaseDsn) -> mysql.connector.MySQLConnection:
    conn = connect(dsn)
    conn.autocommit = False
    cur = conn.cursor()
    cur.execute("CREATE TABLE IF NOT EXISTS test_orders (id INT PRIMARY KEY, note VARCHAR(50)) ENGINE=InnoDB")
    cur.execute("DELETE FROM test_orders")
    conn.commit()
    return conn  # type: ignore[return-value]


def _call_enqueue(cur: object, notification_id: str) -> tuple[int, int]:
    cur.execute(  # type: ignore[attr-defined]
        "CALL email_enqueue(%s, 'a@example.com', NULL, 'subject', 'body', NULL, NULL, NULL)",
        (notification_id,),
    )
    row = cur.fetchall()[0]  # type: ignore[attr-defined]
    while cur.nextset():  # type: ignore[attr-defined]
        pass
    return int(row[0]), int(row[1])


def test_duplicate_inside_business_transaction_keeps_it_intact(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    first = repo.enqueue("order-4", "a@example.com", "s", text_body="x")
    conn = _business_connection(dsn)
    try:
        cur = conn.cursor()
        cur.execute("INSERT INTO test_orders VALUES (1, 'before')")
        affected, attempt_id = _call_enqueue(cur, "order-4")
        cur.execute("INSERT INTO test_orders VALUES (2, 'after')")
        conn.commit()
    finally:
        conn.close()
    assert (affected, attempt_id) == (0, first.attempt_id)
    assert scalar(repo, "SELECT COUNT(*) FROM test_orders") == 2


def test_rollback_of_business_transaction_leaves_no_row(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    conn = _business_connection(dsn)
    try:
        cur = conn.cursor()
        cur.execute("INSERT INTO test_orders VALUES (1, 'x')")
        affected, _ = _call_enqueue(cur, "order-5")
        conn.rollback()
    finally:
        conn.close()
    assert affected == 1
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_events") == 0
    assert scalar(repo, "SELECT COUNT(*) FROM test_orders") == 0


def test_duplicate_seen_even_when_callers_snapshot_predates_it(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    conn = _business_connection(dsn)
    try:
        cur = conn.cursor()
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SELECT COUNT(*) FROM email_delivery_attempts")
        cur.fetchall()
        first = repo.enqueue("order-6", "a@example.com", "s", text_body="x")  # commits after our snapshot
        affected, attempt_id = _call_enqueue(cur, "order-6")
        conn.commit()
    finally:
        conn.close()
    assert (affected, attempt_id) == (0, first.attempt_id)


def test_concurrent_enqueues_of_one_id_make_one_row(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    for round_no in range(20):
        barrier = threading.Barrier(4)
        results: list[tuple[int, int]] = []
        lock = threading.Lock()

        def worker(nid: str = f"race-{round_no}") -> None:
            r = OutboxRepository.open(dsn)
            try:
                barrier.wait()
                res = r.enqueue(nid, "a@example.com", "s", text_body="x")
                with lock:
                    results.append((res.affected, res.attempt_id))
            finally:
                r.close()

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(a for a, _ in results) == [0, 0, 0, 1]
        assert len({i for _, i in results}) == 1
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 20


def test_send_after_delays_the_row(repo: OutboxRepository) -> None:
    from datetime import datetime, timedelta

    later = datetime.utcnow() + timedelta(hours=1)
    result = repo.enqueue("order-7", "a@example.com", "s", html_body="<p>x</p>", send_after=later)
    assert repo.claimable_candidates(10) == []
    assert repo.get_row(result.attempt_id).next_attempt_at == later.replace(microsecond=later.microsecond)


def test_values_are_stored_byte_exact(repo: OutboxRepository) -> None:
    subject = "Grüße 🎉 ' \" \\ ; -- /* */ %s"
    # A body is not a header: it keeps every character, controls included.
    body = "😀" * 1000 + "\u0000\t\u202e"
    # (A non-ASCII local part is refused: SES cannot send to one. A non-ASCII domain is stored as written.)
    result = repo.enqueue("ünïcødé-🎉", "u@exämple.com", subject, text_body=body, html_body=None)
    row = repo.get_row(result.attempt_id)
    assert (row.notification_id, row.to_address, row.subject) == ("ünïcødé-🎉", "u@exämple.com", subject)
    assert (
        scalar(repo, "SELECT text_body FROM email_delivery_attempts WHERE id = %s", (result.attempt_id,))
        == body
    )


HEADER_FIELDS = {
    "notification_id": "n{}1",
    "subject": "s{}s",
    "to_address": "a{}@example.com",
    "from_address": "f{}@example.com",
}
UNSAFE_SAMPLES = (
    "\x00",
    "\t",
    "\x1b",
    "\x7f",
    "\x85",
    "\x9b",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\u200f",
    "\u061c",
)

BAD_ENQUEUES = [
    (dict(notification_id=None), "notification_id"),
    (dict(notification_id=""), "notification_id"),
    (dict(notification_id="x" * 192), "notification_id"),
    (dict(notification_id="trailing "), "notification_id"),
    (dict(to_address="no-at-sign"), "to_address"),
    (dict(to_address="two@@example.com"), "to_address"),
    (dict(to_address="@example.com"), "to_address"),
    (dict(to_address="user@"), "to_address"),
    (dict(to_address="a@b.c\r\nBcc: x@y.z"), "to_address"),
    (dict(to_address="a" * 310 + "@example.com"), "to_address"),
    (dict(to_address=None), "to_address"),
    (dict(from_address="nope"), "from_address"),
    (dict(from_address="a@b\nc"), "from_address"),
    (dict(from_address="a" * 320 + "@b.c"), "from_address"),
    (dict(subject="line\nbreak"), "subject"),
    (dict(subject="carriage\rreturn"), "subject"),
    (dict(subject="s" * 999), "subject"),
    (dict(subject=None), "subject"),
    (dict(text_body=None, html_body=None), "text_body or html_body"),
    (dict(max_attempts=0), "max_attempts"),
    (dict(max_attempts=101), "max_attempts"),
    (dict(max_attempts=-5), "max_attempts"),
    # The shared rule set for header and log fields (email_internal_check_text).
    *[
        ({field: template.format(bad)}, field)
        for field, template in HEADER_FIELDS.items()
        for bad in UNSAFE_SAMPLES
    ],
    *[
        (dict(to_address=bad), "to_address")
        for bad in (
            "a@x.com,b@y.com",
            "a@x.com;b@y.com",
            "Ann <a@x.com>",
            "a b@x.com",
            '"a"@x.com',
            "a\\b@x.com",
        )
    ],
    (dict(send_after=datetime(1, 1, 1)), "send_after"),
    (dict(send_after=datetime(9999, 12, 31)), "send_after"),
]


@pytest.mark.parametrize(("override", "names"), BAD_ENQUEUES)
def test_bad_input_is_refused_and_writes_nothing(repo: OutboxRepository, override: dict, names: str) -> None:
    args = dict(
        notification_id="bad-1",
        to_address="a@example.com",
        subject="s",
        text_body="x",
        html_body=None,
        from_address=None,
        max_attempts=None,
    )
    args.update(override)
    nid, to, subject = args.pop("notification_id"), args.pop("to_address"), args.pop("subject")
    with pytest.raises(InvalidInput, match=names) as info:
        repo.enqueue(nid, to, subject, **args)  # type: ignore[arg-type]
    assert info.value.__cause__ is not None  # raised from the driver error
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_events") == 0


def test_limits_are_inclusive(repo: OutboxRepository) -> None:
    r = repo.enqueue("x" * 191, "a" * 300 + "@" + "b" * 19, "s" * 998, text_body="x", max_attempts=100)
    assert r.affected == 1
    assert repo.enqueue("one", "a@b", "", html_body="x", max_attempts=1).affected == 1


# --- the unit of work: a transition and its event commit together, and a failure undoes only itself --
@pytest.fixture
def failing_event_writes(server: TestServer, dsn: DatabaseDsn) -> Iterator[None]:
    """A test-only trigger that refuses the event of one notification id: the failure of the second
    write of a unit of work, after its first has been made."""
    conn = server.admin_connection(dsn.database)
    cursor = conn.cursor()
    cursor.execute(
        "CREATE TRIGGER test_refuse_event BEFORE INSERT ON email_delivery_events FOR EACH ROW"
        " IF NEW.attempt_id IN (SELECT id FROM email_delivery_attempts WHERE notification_id LIKE 'doomed%')"
        " THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected: event refused'; END IF"
    )
    try:
        yield
    finally:
        cursor.execute("DROP TRIGGER IF EXISTS test_refuse_event")
        conn.close()


def test_an_enqueue_and_its_event_commit_with_the_business_transaction(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    conn = _business_connection(dsn)
    try:
        cur = conn.cursor()
        cur.execute("INSERT INTO test_orders VALUES (1, 'paid')")
        affected, attempt_id = _call_enqueue(cur, "order-uow")
        assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_events") == 0, "not visible before COMMIT"
        conn.commit()
    finally:
        conn.close()
    assert affected == 1
    assert [(e.from_status, e.to_status) for e in repo.events(attempt_id)] == [(None, Status.PENDING)]


def test_a_failure_inside_the_business_transaction_undoes_only_the_enqueue(
    dsn: DatabaseDsn, repo: OutboxRepository, failing_event_writes: None
) -> None:
    conn = _business_connection(dsn)
    try:
        cur = conn.cursor()
        cur.execute("INSERT INTO test_orders VALUES (1, 'before')")
        with pytest.raises(mysql.connector.Error, match="injected: event refused"):
            _call_enqueue(cur, "doomed-1")
        cur.execute("INSERT INTO test_orders VALUES (2, 'after')")
        conn.commit()
    finally:
        conn.close()
    assert scalar(repo, "SELECT COUNT(*) FROM test_orders") == 2, "the caller's own writes stay"
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0, "the enqueue left nothing"


def test_a_failure_under_autocommit_leaves_neither_the_row_nor_a_transition(
    repo: OutboxRepository, failing_event_writes: None
) -> None:
    with pytest.raises(InvalidInput, match="injected"):
        repo.enqueue("doomed-2", "a@example.com", "s", text_body="t")
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0
    # A worker transition too: the claim is undone with its refused event.
    attempt_id = repo.enqueue("fine-1", "a@example.com", "s", text_body="t").attempt_id
    cursor = repo.connection.cursor()
    cursor.execute(
        "UPDATE email_delivery_attempts SET notification_id = 'doomed-3' WHERE id = %s", (attempt_id,)
    )
    cursor.close()
    with pytest.raises(InvalidInput, match="injected"):
        repo.try_claim(attempt_id, "t" * 32, "w", 60)
    row = repo.get_row(attempt_id)
    assert row.status is Status.PENDING and row.claim_token is None
