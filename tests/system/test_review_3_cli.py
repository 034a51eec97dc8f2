"""What a new user met in the CLI (issue 38), against a real server: lists print real tabs and no
`None`; a reader that stops early (`| head`) ends the command quietly; `status` says what its daily
count counts; `migrate` prints a summary; `retention` previews with --dry-run and will not delete
emails seconds old by accident; operators close the provider breaker; sizes are checked before
anything is sent to the server."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from tests.conftest import TestServer
from tests.support.accounts import granted_account
from tests.support.helpers import enqueue_many, scalar, token
from tests.support.history import claim


def run(dsn: DatabaseDsn, *argv: str) -> int:
    return main([*argv, "--dsn", dsn.url()])


def failed(repo: OutboxRepository, error_message: str | None) -> int:
    (attempt_id,) = enqueue_many(repo, 1, prefix=token())
    repo.finalize_failure(
        attempt_id, claim(repo, attempt_id), permanent=True, error_code="Erased" if error_message is None else "X",
        error_message=error_message, retry_delay_seconds=0,
    )  # fmt: skip
    return attempt_id


# --- 10. small things ------------------------------------------------------------------------------
def test_allow_lists_print_real_tabs(dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(dsn, "senders", "add", "@example.org", "--by", "ann", "--reason", "ours") == 0
    assert run(dsn, "configuration-sets", "add", "receipts", "--by", "ann", "--reason", "events") == 0
    capsys.readouterr()
    for group in ("senders", "configuration-sets"):
        assert run(dsn, group, "list") == 0
        out = capsys.readouterr().out
        assert "\t" in out and "\\x09" not in out, out


def test_list_shows_an_error_code_without_a_message_alone(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    failed(repo, None)
    assert run(dsn, "list", "--status", "Failed") == 0
    out = capsys.readouterr().out
    assert "Erased" in out and "None" not in out


def test_list_into_a_reader_that_stops_early_ends_quietly(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    enqueue_many(repo, 1500, prefix="many-rows-to-fill-the-pipe")
    command = [sys.executable, "-m", "email_outbox.cli", "list", "--status", "Pending", "--limit", "1500"]
    env = {"EMAIL_OUTBOX_DSN": dsn.url(), "PATH": "/usr/bin:/bin"}
    reader = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.readline()
    reader.stdout.close()  # `| head -1`
    stderr = reader.stderr.read().decode()
    assert reader.wait(30) == 0
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_status_names_what_its_daily_count_counts(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    assert repo.send_rate_report("w", 14.0, "ses", 13.0, 50_000, "ses", 289) == 1
    assert run(dsn, "status") == 0
    out = capsys.readouterr().out
    assert "sent in 24 h" not in out
    assert "handed out in 24 h (SES count at the last report, plus sends granted since) 289 of 50000" in out


def test_migrate_prints_a_summary_and_the_details_with_verbose(
    server: TestServer, fresh_dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fresh_dsn, "migrate") == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) <= 6, out
    assert "procedures installed" in out and "installed procedure email_enqueue\n" not in out
    assert run(fresh_dsn, "migrate", "-v") == 0
    assert "procedures up to date" in capsys.readouterr().out


# --- 2. retention: a preview, and no accident with recent emails -------------------------------------
def test_retention_dry_run_counts_and_deletes_nothing(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(3):
        failed(repo, "no")
    assert run(dsn, "retention", "--older-than-days", "0", "--dry-run", "--by", "ops") == 0
    out = capsys.readouterr().out
    assert "would delete 3 emails" in out
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 3


def test_retention_under_a_day_needs_its_own_flag(
    dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    failed(repo, "no")
    assert run(dsn, "retention", "--older-than-days", "0", "--by", "ops") == 2
    assert "--including-recent" in capsys.readouterr().err
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 1
    assert run(dsn, "retention", "--older-than-days", "0", "--including-recent", "--by", "ops") == 0
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0


# --- 5. operators close the breaker ------------------------------------------------------------------
def test_an_operator_closes_the_provider_breaker(
    server: TestServer, dsn: DatabaseDsn, repo: OutboxRepository, capsys: pytest.CaptureFixture[str]
) -> None:
    assert repo.breaker_open("ses", "worker-a", "ServiceUnavailable", "503", 3600) == 1
    with granted_account(server, dsn, "operator") as operator:
        assert run(operator, "breaker", "close", "--by", "alice", "--reason", "SES status page green") == 0
    assert "closed" in capsys.readouterr().out
    state = repo.breaker_state("ses")
    assert state.state == "closed" and state.changed_by == "alice"
    assert run(dsn, "breaker", "close", "--by", "alice", "--reason", "again") == 1


# --- 9. sizes checked before anything is sent ---------------------------------------------------------
def message_file(tmp_path: Path, notification_id: str, attachment_bytes: int) -> Path:
    document = {
        "notification_id": notification_id, "to": ["a@example.com"], "subject": "s", "text": "t",
        "attachments": [{"filename": "a.bin", "content_type": "application/octet-stream",
                         "content_base64": base64.b64encode(b"\1" * attachment_bytes).decode()}],
    }  # fmt: skip
    path = tmp_path / f"{notification_id}.json"
    path.write_text(json.dumps(document))
    return path


def bytes_received(repo: OutboxRepository) -> int:
    return int(
        scalar(
            repo,
            "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'BYTES_RECEIVED'",
        )
    )


def test_a_message_over_ses_limit_is_refused_before_it_is_sent(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = message_file(tmp_path, "big", 31 * 1024 * 1024)  # 41.3 MB in base64: over SES's 40 MB
    before = bytes_received(repo)
    assert run(dsn, "enqueue", "--json", str(path)) == 2
    err = capsys.readouterr().err
    assert "40 MB" in err and "max_allowed_packet" not in err
    assert bytes_received(repo) - before < 1_000_000, "the message never went to the server"
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0


def test_a_packet_refusal_is_explained_as_the_server_setting(
    dsn: DatabaseDsn,
    repo: OutboxRepository,
    server: TestServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = server.admin_connection()
    cursor = admin.cursor()
    cursor.execute("SELECT @@GLOBAL.max_allowed_packet")
    (before,) = cursor.fetchone()
    cursor.execute("SET GLOBAL max_allowed_packet = 1048576")
    try:
        code = run(dsn, "enqueue", "--json", str(message_file(tmp_path, "mid", 2 * 1024 * 1024)))
    finally:
        cursor.execute(f"SET GLOBAL max_allowed_packet = {int(before)}")
        admin.close()
    assert code == 2
    err = capsys.readouterr().err
    assert "max_allowed_packet" in err and "not SES's limit" in err, err
