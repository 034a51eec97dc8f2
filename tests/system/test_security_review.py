"""The security review: one test (or a few) per finding, each against the real server."""

from __future__ import annotations

import io
import json
import logging
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from email_outbox.cli.main import build_parser, main
from email_outbox.db.dsn import DatabaseDsn, resolve_dsn_text
from email_outbox.db.repository import OutboxRepository
from email_outbox.display import UNSAFE_CHARACTERS
from email_outbox.errors import InvalidInput
from email_outbox.logs import JsonFormatter, TextFormatter
from email_outbox.models import Status
from email_outbox.worker.config import WorkerConfig
from email_outbox_devtools.dbserver import free_port
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.support.harness import TestServer
from tests.support.helpers import enqueue_many
from tests.support.worker_harness import account, drained, health, spawn_worker, wait_until


def _account_exists(server: TestServer, user: str) -> bool:
    conn = server.admin_connection()
    cursor = conn.cursor()
    cursor.execute("SELECT COUNT(*) FROM mysql.user WHERE User = %s", (user,))
    (count,) = cursor.fetchone()
    conn.close()
    return bool(count)


@pytest.fixture
def permissive_sql_mode(server: TestServer) -> Iterator[None]:
    """The server as some installations run it: GRANT may create accounts (no NO_AUTO_CREATE_USER)."""
    conn = server.admin_connection()
    cursor = conn.cursor()
    cursor.execute("SELECT @@GLOBAL.sql_mode")
    (saved,) = cursor.fetchone()
    cursor.execute("SET GLOBAL sql_mode = 'STRICT_TRANS_TABLES'")
    try:
        yield
    finally:
        cursor.execute("SET GLOBAL sql_mode = %s", (saved,))
        conn.close()


def _stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


# --- finding 3: grant never creates an account by accident -------------------------------------------
def test_grant_to_a_missing_account_is_one_line_and_creates_nothing(
    server: TestServer,
    dsn: DatabaseDsn,
    permissive_sql_mode: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    user = f"eo_ghost_{uuid.uuid4().hex[:8]}"
    code = main(["grant", "worker", f"{user}@%", "--dsn", dsn.url()])
    errors = _stderr_lines(capsys)
    assert code == 2
    assert len(errors) == 1 and "does not exist" in errors[0] and "--create" in errors[0]
    assert "Traceback" not in errors[0]
    assert not _account_exists(server, user)


def test_grant_create_needs_a_password_and_never_takes_it_from_argv(
    server: TestServer, dsn: DatabaseDsn, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    user = f"eo_new_{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(["grant", "worker", f"{user}@%", "--dsn", dsn.url(), "--create", "--password-stdin"]) == 2
    assert "empty password" in _stderr_lines(capsys)[-1]
    assert not _account_exists(server, user)
    with pytest.raises(SystemExit) as usage:
        main(["grant", "worker", f"{user}@%", "--dsn", dsn.url(), "--create", "--password", "x"])
    assert usage.value.code == 2

    monkeypatch.setattr(sys, "stdin", io.StringIO("a-Good-pass-1\n"))
    try:
        assert main(["grant", "worker", f"{user}@%", "--dsn", dsn.url(), "--create", "--password-stdin"]) == 0
        assert _account_exists(server, user)
        login = DatabaseDsn(user, "a-Good-pass-1", dsn.host, dsn.port, dsn.database, dsn.unix_socket)
        OutboxRepository.open(login).close()
    finally:
        conn = server.admin_connection()
        conn.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
        conn.close()


# --- finding 6: secrets off the command line ---------------------------------------------------------
def test_every_command_takes_the_dsn_from_a_file(
    dsn: DatabaseDsn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn_file = tmp_path / "dsn"
    dsn_file.write_text(dsn.url() + "\n")
    dsn_file.chmod(0o600)
    assert main(["status", "--dsn-file", str(dsn_file)]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err
    parser = build_parser()
    for command, choice in parser._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        options = {o for action in choice._actions for o in action.option_strings}
        if "--dsn" in options or command == "worker":
            assert "--dsn-file" in options, command


def test_a_password_in_argv_draws_a_warning_naming_the_alternative(
    dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]
) -> None:
    with_password = DatabaseDsn("u", "hunter2", dsn.host, dsn.port, dsn.database, dsn.unix_socket)
    assert resolve_dsn_text(with_password.url(), None, {}) == with_password.url()
    err = capsys.readouterr().err
    assert "--dsn-file" in err and "hunter2" not in err
    assert resolve_dsn_text(None, None, {"EMAIL_OUTBOX_DSN": with_password.url()}) == with_password.url()
    assert capsys.readouterr().err == ""


def test_a_missing_dsn_file_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--dsn-file", str(tmp_path / "absent")]) == 2
    errors = _stderr_lines(capsys)
    assert len(errors) == 1 and "absent" in errors[0]


# --- finding 4: metrics on loopback, bounded, with read timeouts --------------------------------------
def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def test_500_idle_connections_leave_threads_flat_and_sends_unaffected(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path
) -> None:
    assert WorkerConfig.__dataclass_fields__["metrics_host"].default == "127.0.0.1"
    enqueue_many(repo, 20, prefix="warm")
    with SesEndpoint() as endpoint:
        port = free_port()
        worker = spawn_worker(dsn, endpoint.url, tmp_path, "idle-flood", concurrency=4, metrics_port=port)
        idle: list[socket.socket] = []
        try:
            wait_until(lambda: drained(repo) and health(port) == 200, 60, "the first batch to go out")
            before = _threads(worker.proc.pid)
            for _ in range(500):
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            enqueue_many(repo, 40, prefix="during")
            # A scrape answers once the server has dealt with every connection ahead of it.
            wait_until(lambda: health(port) == 200, 30, "/healthz to answer beside 500 idle connections")
            assert _threads(worker.proc.pid) <= before + 2
            wait_until(lambda: drained(repo), 60, "the emails enqueued during the flood to go out")
        finally:
            for sock in idle:
                sock.close()
            assert worker.terminate() == 0
        assert account(repo, endpoint, 60).by_status[Status.SENT] == 60


# --- finding 8: every user error is one line and a documented exit code ------------------------------
BAD_INPUT: list[tuple[list[str], int]] = [
    (["status", "--since", "x"], 2),
    (["list", "--status", "Nope"], 2),
    (["list", "--status", "Sent", "--since", "yesterday-ish"], 2),
    (["list", "--status", "Sent", "--limit", "0"], 2),
    (["show"], 2),
    (["show", "999999999"], 1),
    (["show", "--notification-id", "no-such-id"], 1),
    (["show", "--notification-id", "x" * 5000], 1),
    (["requeue", "999999999", "--by", "ops", "--reason", "r"], 1),
    (["requeue", "1", "--by", "", "--reason", "r"], 2),
    (["requeue", "--all-unknown", "--by", "ops", "--reason", "r"], 2),
    (["requeue", "--all-unknown", "--older-than", "forever", "--by", "ops", "--reason", "r", "--yes"], 2),
    (["resolve", "999999999", "--outcome", "Sent", "--by", "ops", "--reason", "r"], 1),
    (["resolve", "1", "--outcome", "Sent", "--by", "ops", "--reason", "r", "--message-id", "m" * 500], 2),
    (["enqueue", "--notification-id", "n1", "--to", "not-an-address", "--subject", "s", "--text", "t"], 2),
    (["enqueue", "--notification-id", "n2", "--subject", "s", "--text", "t"], 2),
    (["enqueue", "--json", "/nonexistent/file.json"], 2),
    (["enqueue", "--json", "-"], 2),
    (
        [
            "enqueue",
            "--notification-id",
            "n3",
            "--to",
            "a@example.com",
            "--subject",
            "s",
            "--text",
            "t",
            "--send-after",
            "not-a-time",
        ],
        2,
    ),
    (
        [
            "enqueue",
            "--notification-id",
            "n4",
            "--to",
            "a@example.com",
            "--subject",
            "s",
            "--text-file",
            "/nonexistent",
        ],
        2,
    ),
    (["purge-bodies", "--older-than-days", "-5"], 2),
    (["purge-bodies", "--older-than-days", "30", "--batch", "0"], 2),
    (["grant", "worker", "bad'name@%"], 2),
    (["grant", "nosuchrole", "x"], 2),
    (["grant", "worker", "x@%", "--password-env", "NOPE"], 2),
    (["grant", "worker", "eo_x@%", "--create", "--password-env", "EO_UNSET_VARIABLE"], 2),
    (["worker", "--concurrency", "abc"], 2),
    (["worker", "--lease-seconds", "-1"], 2),
]


@pytest.mark.parametrize(("argv", "expected"), BAD_INPUT, ids=[" ".join(a)[:60] for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_a_documented_exit_code(
    dsn: DatabaseDsn,
    argv: list[str],
    expected: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("EMAIL_OUTBOX_DSN", dsn.url())
    monkeypatch.setattr(sys, "stdin", io.StringIO("not json"))
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    errors = _stderr_lines(capsys)
    assert code == expected, errors
    assert errors and not any("Traceback" in line for line in errors)
    assert len([line for line in errors if not line.startswith(("usage:", " "))]) == 1, errors


@pytest.mark.parametrize(
    "document",
    [
        '{"notification_id": 5, "to": ["a@example.com"], "subject": {}, "text": 1}',
        '{"notification_id": "j", "to": "a@example.com", "subject": "s", "text": "t", "max_attempts": "abc"}',
        '{"notification_id": "j", "to": "a@example.com", "subject": "s", "text": "t", "max_attempts": 1e99}',
    ],
)
def test_enqueue_json_of_the_wrong_types_is_refused_in_one_line(
    dsn: DatabaseDsn, document: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "email.json"
    path.write_text(document)
    assert main(["enqueue", "--dsn", dsn.url(), "--json", str(path)]) == 2
    assert len(_stderr_lines(capsys)) == 1


def test_a_database_without_the_schema_says_run_migrate(
    fresh_dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["list", "--status", "Sent", "--dsn", fresh_dsn.url()]) == 1
    assert "email-outbox migrate" in _stderr_lines(capsys)[-1]


# --- finding 5 (operator's terminal): stored text is printed with its control characters visible ------
HOSTILE = "ok\x1b[2J\x1b]0;pwned\x07\r\nforged line\u202egnp.exe\u2028\x85\x7f\x00"


def test_list_and_show_make_control_characters_visible(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    # Written by a DBA straight into the table (the procedures refuse such text), as old rows may hold.
    cursor = repo.connection.cursor()
    row_id = repo.enqueue("hostile-1", "a@example.com", "subject", text_body="x").attempt_id
    cursor.execute(
        "UPDATE email_delivery_attempts SET notification_id = %s, subject = %s, last_error_code = 'X',"
        " last_error_message = %s, status = 'Failed', claim_due_at = DEFAULT",
        (HOSTILE, HOSTILE, HOSTILE),
    )
    cursor.close()
    views = (
        ["list", "--status", "Failed"],
        ["show", "--notification-id", HOSTILE],
        ["show", "--json", str(row_id)],
    )
    for argv in views:
        assert main([*argv, "--dsn", dsn.url()]) == 0
        out = capsys.readouterr().out
        assert not visible_unsafe(out.replace("\n", "")), (argv, out)
        assert "\\x1b" in out or "\\u001b" in out


def visible_unsafe(text: str) -> list[str]:
    return UNSAFE_CHARACTERS.findall(text)


# --- finding 1: senders are allowed, not assumed -------------------------------------------------------
def _count_rows(repo: OutboxRepository, table: str) -> int:
    cursor = repo.connection.cursor()
    cursor.execute(f"SELECT COUNT(*) FROM {table}")
    (n,) = cursor.fetchone()  # type: ignore[misc]
    cursor.close()
    return int(n)


@pytest.fixture
def allow_list(repo: OutboxRepository) -> Iterator[OutboxRepository]:
    """The allow-list as a new install has it (empty), put back as the session's fixture left it."""
    saved = repo.allowed_senders()
    for s in saved:
        repo.sender_remove(s.sender, s.account, "test", "emptied for one test")
    yield repo
    for s in repo.allowed_senders():
        repo.sender_remove(s.sender, s.account, "test", "cleanup")
    for s in saved:
        repo.sender_add(s.sender, s.account, s.added_by, s.reason)


def test_an_enqueue_from_a_sender_not_allowed_is_refused_and_writes_nothing(
    allow_list: OutboxRepository,
) -> None:
    repo = allow_list
    with pytest.raises(InvalidInput, match=r"from_address ceo@example\.com is not an allowed sender"):
        repo.enqueue("spoof-1", "a@example.net", "s", text_body="t", from_address="ceo@example.com")
    assert _count_rows(repo, "email_delivery_attempts") == 0

    assert repo.sender_add("billing@example.com", "", "ops", "invoices") == 1
    assert repo.sender_add("billing@example.com", "", "ops", "again") == 0
    assert repo.enqueue(
        "ok-1", "a@example.net", "s", text_body="t", from_address="BILLING@example.com"
    ).affected
    with pytest.raises(InvalidInput, match="not an allowed sender"):
        repo.enqueue("spoof-2", "a@example.net", "s", text_body="t", from_address="ceo@example.com")

    assert repo.sender_add("@example.org", "", "ops", "the whole domain") == 1
    assert repo.enqueue(
        "ok-2", "a@example.net", "s", text_body="t", from_address="anyone@Example.ORG"
    ).affected
    # A domain entry allows that domain only, not a subdomain or a lookalike.
    for other in ("x@sub.example.org", "x@example.org.evil.com"):
        with pytest.raises(InvalidInput, match="not an allowed sender"):
            repo.enqueue(f"spoof-{other}", "a@example.net", "s", text_body="t", from_address=other)

    assert repo.sender_remove("billing@example.com", "", "ops", "retired") == 1
    with pytest.raises(InvalidInput, match="not an allowed sender"):
        repo.enqueue("spoof-3", "a@example.net", "s", text_body="t", from_address="billing@example.com")
    # No sender means the worker's default, checked at the worker's start.
    assert repo.enqueue("default-1", "a@example.net", "s", text_body="t").affected == 1


def test_an_allowed_sender_can_be_limited_to_one_account(
    allow_list: OutboxRepository, accounts: dict[str, DatabaseDsn]
) -> None:
    enqueuer = accounts["enqueuer"]
    allow_list.sender_add("shop@example.com", enqueuer.user, "ops", "the shop's own sender")
    allow_list.sender_add("hr@example.com", "someone_else", "ops", "not the shop's")
    shop = OutboxRepository.open(enqueuer)
    try:
        assert shop.enqueue(
            "acct-1", "a@example.net", "s", text_body="t", from_address="shop@example.com"
        ).affected
        with pytest.raises(InvalidInput, match=r"hr@example\.com is not an allowed sender"):
            shop.enqueue("acct-2", "a@example.net", "s", text_body="t", from_address="hr@example.com")
    finally:
        shop.close()
    # The root test account is not the shop's account: the same sender is refused to it.
    with pytest.raises(InvalidInput, match="not an allowed sender"):
        allow_list.enqueue("acct-3", "a@example.net", "s", text_body="t", from_address="shop@example.com")


def test_senders_cli_changes_are_logged_with_the_callers_account(
    allow_list: OutboxRepository, dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]
) -> None:
    env = ["--dsn", dsn.url()]
    # Other tests share this database's log: only the entries this test writes are its to check.
    cursor = allow_list.connection.cursor()
    cursor.execute("SELECT COALESCE(MAX(id), 0) FROM email_allowed_senders_log")
    ((logged_before,),) = cursor.fetchall()
    cursor.close()
    assert main(["senders", "add", "@example.com", "--by", "ann", "--reason", "our domain", *env]) == 0
    assert main(["senders", "add", "@example.com", "--by", "ann", "--reason", "twice", *env]) == 1
    assert main(["senders", "list", *env]) == 0
    assert "@example.com" in capsys.readouterr().out
    assert main(["senders", "remove", "@example.com", "--by", "bob", "--reason", "moved", *env]) == 0
    assert main(["senders", "add", "a@b@c", "--by", "ann", "--reason", "x", *env]) == 2
    assert main(["senders", "add", "@example.com", "--by", "ann", "--reason", "line\nbreak", *env]) == 2
    cursor = allow_list.connection.cursor()
    cursor.execute(
        "SELECT action, sender, actor, db_account, reason FROM email_allowed_senders_log WHERE id > %s"
        " ORDER BY id",
        (logged_before,),
    )
    log = cursor.fetchall()
    cursor.close()
    assert [(r[0], r[1], r[2], r[4]) for r in log] == [
        ("add", "@example.com", "ann", "our domain"),
        ("remove", "@example.com", "bob", "moved"),
    ]
    assert all(r[3].startswith(dsn.user + "@") for r in log), "the server's word for who called"


def test_the_worker_refuses_to_start_when_its_default_sender_is_not_allowed(
    allow_list: OutboxRepository, dsn: DatabaseDsn, tmp_path: Path
) -> None:
    with SesEndpoint() as endpoint:
        worker = spawn_worker(dsn, endpoint.url, tmp_path, "unallowed-default")
        assert worker.proc.wait(timeout=60) == 2
    assert "shop@example.com is not on the sender allow-list" in worker.log()


# --- finding 5 (logs): no field can start a new line ---------------------------------------------------
def test_a_log_field_cannot_forge_a_line_or_reach_the_terminal() -> None:
    formatter = TextFormatter()
    record = logging.makeLogRecord(
        {"name": "email_outbox.worker", "levelno": logging.INFO, "levelname": "INFO", "msg": "sent\nforged",
         "notification_id": HOSTILE, "count": 3}
    )  # fmt: skip
    line = formatter.format(record)
    assert "\n" not in line and "\r" not in line and not UNSAFE_CHARACTERS.search(line)
    assert "count=3" in line and 'notification_id="ok\\x1b[2J' in line
    as_json = json.loads(JsonFormatter().format(record))
    assert as_json["notification_id"] == HOSTILE, "JSON keeps the value exactly, escaped by construction"
