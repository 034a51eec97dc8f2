"""The second security review (issue 25): one test (or a few) per finding, each through the real
interface: CALL on the real server, the CLI as a process, HTTP against a running server. Findings 1, 9
and 10 (the console's door) are in tests/console/test_console_login.py, 2 in
tests/contract/test_notification_ids_per_account.py, 3 in tests/events/test_events.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.display import visible
from email_outbox.errors import ConfigurationSetNotAllowed, InvalidInput
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.conftest import db_now
from tests.support.harness import TestServer
from tests.support.helpers import enqueue_many, scalar, token
from tests.support.worker_harness import drained, health, spawn_worker, wait_until


@pytest.fixture
def only_billing(repo: OutboxRepository) -> Iterator[OutboxRepository]:
    """An allow-list holding billing@example.com alone, put back as the session's fixture left it."""
    saved = repo.allowed_senders()
    for s in saved:
        repo.sender_remove(s.sender, s.account, "test", "emptied for one test")
    assert repo.sender_add("billing@example.com", "", "ops", "invoices") == 1
    yield repo
    for s in repo.allowed_senders():
        repo.sender_remove(s.sender, s.account, "test", "cleanup")
    for s in saved:
        repo.sender_add(s.sender, s.account, s.added_by, s.reason)


# --- finding 7: look-alike senders ------------------------------------------------------------------
LOOK_ALIKES = (
    "billing@ex\u00e4mple.com",  # a with diaeresis: utf8mb4_unicode_ci folds it to a
    "b\u00edlling@example.com",  # i with acute
    "billing\u200b@example.com",  # zero width space: reads as billing@example.com
    "billing\u00ad@example.com",  # soft hyphen
    "billing\ufeff@example.com",  # zero width no-break space
    "billing\u2060@example.com",  # word joiner
)


@pytest.mark.parametrize("sender", LOOK_ALIKES, ids=lambda s: visible(s))
def test_a_look_alike_of_an_allowed_sender_is_refused_and_writes_nothing(
    only_billing: OutboxRepository, sender: str
) -> None:
    repo = only_billing
    with pytest.raises(InvalidInput, match="from_address"):
        repo.enqueue("look-alike", "a@example.net", "s", text_body="t", from_address=sender)
    with pytest.raises(InvalidInput, match="from"):
        repo.enqueue_message(
            "look-alike-message",
            f'{{"from": "{sender}", "to": ["a@example.net"], "subject": "s", "text": "t"}}',
        )
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0
    # The real sender still passes.
    assert repo.enqueue(
        "real", "a@example.net", "s", text_body="t", from_address="Billing@example.com"
    ).affected


def test_invisible_format_characters_are_refused_in_recipients_and_the_allow_list(
    only_billing: OutboxRepository,
) -> None:
    repo = only_billing
    for address in ("ann\u200b@example.com", "ann\u200d@example.com", "ann@exa\u00admple.com"):
        with pytest.raises(InvalidInput, match="to_address"):
            repo.enqueue(f"to-{visible(address)}", address, "s", text_body="t")
    with pytest.raises(InvalidInput, match="ASCII"):
        repo.sender_add("billing@ex\u00e4mple.com", "", "ops", "look-alike")
    with pytest.raises(InvalidInput, match="sender"):
        repo.sender_add("billing\u200b@example.com", "", "ops", "look-alike")
    # Text keeps the joiners emoji and some scripts need; an invisible space is refused there too.
    assert repo.enqueue(
        "family", "ann@example.com", "\U0001f468\u200d\U0001f469\u200d\U0001f467", text_body="t"
    ).affected
    with pytest.raises(InvalidInput, match="subject"):
        repo.enqueue("hidden", "ann@example.com", "pay\u200bpal", text_body="t")
    # What is already stored shows the character as an escape, in the console and the CLI alike.
    assert visible("billing\u200b@example.com") == "billing\\u200b@example.com"


# --- finding 8: an enqueuer can neither bypass the event pipeline nor jump the queue ----------------
def _cli(dsn: DatabaseDsn, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "email_outbox.cli", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, "EMAIL_OUTBOX_DSN": dsn.url()},
    )  # fmt: skip


def _with_set(name: str) -> str:
    return json.dumps({"to": ["a@example.com"], "subject": "s", "text": "t", "configuration_set": name})


def test_a_message_names_only_a_configuration_set_the_operators_allowed(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    with pytest.raises(
        ConfigurationSetNotAllowed, match="configuration_set no-events is not on the list"
    ) as info:
        repo.enqueue_message("hide-bounces", _with_set("no-events"))
    assert info.value.errno == 45011
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0

    added = _cli(dsn, "configuration-sets", "add", "no-events", "--by", "ops", "--reason", "ticket 7")
    assert added.returncode == 0, added.stderr
    listed = _cli(dsn, "configuration-sets", "list")
    assert "no-events" in listed.stdout and "ticket 7" in listed.stdout
    assert repo.enqueue_message("allowed", _with_set("no-events")).affected == 1

    removed = _cli(dsn, "configuration-sets", "remove", "no-events", "--by", "ops", "--reason", "retired")
    assert removed.returncode == 0, removed.stderr
    with pytest.raises(ConfigurationSetNotAllowed):
        repo.enqueue_message("after-removal", _with_set("no-events"))
    log = scalar(
        repo,
        "SELECT GROUP_CONCAT(action ORDER BY id) FROM email_allowed_configuration_sets_log WHERE name = 'no-events'",
    )
    assert log == "add,remove"


def test_a_send_after_in_the_past_is_stored_as_now_and_jumps_no_queue(repo: OutboxRepository) -> None:
    waiting = repo.enqueue("waiting", "a@example.com", "s", text_body="t").attempt_id
    past = db_now(repo) - timedelta(days=29)
    jumper = repo.enqueue("jumper", "b@example.com", "s", text_body="t", send_after=past).attempt_id
    document = {"to": ["c@example.com"], "subject": "s", "text": "t", "send_after": past.isoformat() + "Z"}
    jumper_message = repo.enqueue_message("jumper-message", json.dumps(document)).attempt_id
    for attempt_id in (jumper, jumper_message):
        row = repo.get_row(attempt_id)
        assert row.next_attempt_at == row.created_at, "stored as now"
    claimed = repo.claim_batch(token(), "w1", 60, 1)
    assert [c.id for c in claimed] == [waiting], "the row already waiting goes first"


# --- finding 4: grant --create never keeps an existing account silently -----------------------------
def test_grant_create_fails_when_the_account_exists_and_says_which(
    server: TestServer, dsn: DatabaseDsn
) -> None:
    user = f"eo_exists_{uuid.uuid4().hex[:8]}"
    admin = server.admin_connection()
    admin.cursor().execute(f"CREATE USER '{user}'@'%'")  # an account with no password at all
    try:
        created = subprocess.run(
            [sys.executable, "-m", "email_outbox.cli", "grant", "enqueuer", f"{user}@%", "--create", "--password-stdin"],
            input="a-Good-pass-1\n", capture_output=True, text=True, timeout=120,
            env={**os.environ, "EMAIL_OUTBOX_DSN": dsn.url()},
        )  # fmt: skip
        assert created.returncode != 0
        lines = created.stderr.strip().splitlines()
        assert len(lines) == 1 and f"account {user}@% already exists" in lines[0], created.stderr
        cursor = admin.cursor()
        cursor.execute(f"SHOW GRANTS FOR '{user}'@'%'")
        assert not any("EXECUTE" in str(row) for row in cursor.fetchall()), "nothing granted"
    finally:
        admin.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
        admin.close()


# --- finding 11: a malformed DSN is one line, not a traceback ------------------------------------------
@pytest.mark.parametrize("how", ["--dsn", "EMAIL_OUTBOX_DSN"])
def test_a_malformed_dsn_is_one_line_and_exit_2(how: str) -> None:
    dsn = "mysql://u:s3cret-pw@[::1/outbox"
    args, env = (["--dsn", dsn], {}) if how == "--dsn" else ([], {"EMAIL_OUTBOX_DSN": dsn})
    done = subprocess.run(
        [sys.executable, "-m", "email_outbox.cli", "status", *args],
        capture_output=True, text=True, timeout=120, env={**os.environ, **env},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "DSN is not a URL" in lines[0] and "[::1]" in lines[0]
    assert "s3cret-pw" not in done.stderr


# --- findings 5 and 11: one bounded metrics server for the worker and the events consumer -------------
def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def _get(port: int, path: str) -> int:
    """The status of one GET, tried once: under load a probe must be answered, not retried."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_workers_healthz_and_metrics_answer_at_once_beside_300_idle_connections(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path
) -> None:
    """64 idle sockets used to make /healthz refuse everyone until they timed out: a liveness probe
    failed and the pod was restarted. Now the oldest idle connection makes room for the probe."""
    enqueue_many(repo, 5, prefix="warm")
    with SesEndpoint() as endpoint:
        port = free_port()
        worker = spawn_worker(dsn, endpoint.url, tmp_path, "idle-300", concurrency=2, metrics_port=port)
        idle: list[socket.socket] = []
        try:
            wait_until(lambda: drained(repo) and health(port) == 200, 60, "the worker to be up and drained")
            before = _threads(worker.proc.pid)
            idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(300)]
            assert _get(port, "/healthz") == 200
            assert _get(port, "/metrics") == 200
            assert _threads(worker.proc.pid) <= before + 1
        finally:
            for sock in idle:
                sock.close()
            assert worker.terminate() == 0


def test_the_events_consumers_metrics_are_the_same_bounded_server(dsn: DatabaseDsn) -> None:
    """The consumer's /metrics was prometheus_client's: a thread per connection, no timeout (500 idle
    sockets, 504 threads)."""
    port = free_port()
    consumer = subprocess.Popen(
        [sys.executable, "-m", "email_outbox.cli", "events", "--from-file", "-", "--metrics-port", str(port)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "EMAIL_OUTBOX_DSN": dsn.url()},
    )  # fmt: skip
    idle: list[socket.socket] = []
    try:
        wait_until(lambda: health(port) == 200, 60, "the consumer's metrics server to start")
        before = _threads(consumer.pid)
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(500)]
        assert _get(port, "/metrics") == 200
        assert _get(port, "/healthz") == 200
        assert _threads(consumer.pid) <= before + 1, "one thread, whatever the number of clients"
    finally:
        for sock in idle:
            sock.close()
        consumer.kill()
        consumer.communicate(timeout=30)
