"""Migrations: fresh, re-applied, concurrent, and after a migrator killed with -9. Plus the drift guard."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import mysql.connector
import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository, connect
from email_outbox.errors import MigrationError
from email_outbox.models import Status
from email_outbox.procedure_files import load_procedures, migrations_dir, procedures_dir
from email_outbox.schema.migrate import migrate
from email_outbox.schema.routines import check_drift
from tests.support.harness import TestServer

CLI = [sys.executable, "-m", "email_outbox.cli"]


def _env(dsn: DatabaseDsn, **extra: str) -> dict[str, str]:
    return {**os.environ, "EMAIL_OUTBOX_DSN": dsn.url(), **extra}


def _routines(dsn: DatabaseDsn) -> dict[str, str]:
    conn = connect(dsn)
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT ROUTINE_NAME, CONCAT(CREATED, '|', LAST_ALTERED) FROM information_schema.ROUTINES"
            " WHERE ROUTINE_SCHEMA = DATABASE()"
        )
        return {str(n): str(t) for n, t in cur.fetchall()}  # type: ignore[misc]
    finally:
        conn.close()


def _drift(dsn: DatabaseDsn) -> object:
    conn = connect(dsn)
    try:
        cur = conn.cursor()
        return check_drift(cur)
    finally:
        conn.close()


def test_fresh_apply_via_cli(fresh_dsn: DatabaseDsn) -> None:
    out = subprocess.run([*CLI, "migrate"], env=_env(fresh_dsn), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "applied migration 0001_schema" in out.stdout
    assert "procedures installed (-v lists them)" in out.stdout
    names = {p.name for p in load_procedures()}
    assert names <= set(_routines(fresh_dsn))
    assert _drift(fresh_dsn).clean  # type: ignore[attr-defined]


def test_reapply_changes_nothing_and_procedures_never_missing(fresh_dsn: DatabaseDsn) -> None:
    migrate(fresh_dsn)
    before = _routines(fresh_dsn)
    missing: list[str] = []
    calls = 0
    done = threading.Event()

    def caller() -> None:
        nonlocal calls
        repo = OutboxRepository.open(fresh_dsn)
        try:
            while not done.is_set():
                try:
                    repo.outbox_stats()
                    calls += 1
                except Exception as exc:
                    missing.append(repr(exc))
        finally:
            repo.close()

    thread = threading.Thread(target=caller)
    thread.start()
    try:
        time.sleep(0.2)  # let the caller loop before the migrations run (no condition to await: load)
        for _ in range(3):
            report = migrate(fresh_dsn)
            assert report.applied == [] and report.procedures_installed == []
    finally:
        done.set()
        thread.join()
    assert missing == []
    assert calls > 0
    assert _routines(fresh_dsn) == before, "unchanged procedures must not be re-created"


def test_changed_procedure_is_replaced_without_a_gap(
    fresh_dsn: DatabaseDsn, tmp_path: Path, server: TestServer
) -> None:
    migrate(fresh_dsn)
    home = tmp_path / "home"
    shutil.copytree(procedures_dir(), home / "procedures")
    shutil.copytree(migrations_dir(), home / "db" / "migrations")
    stats = home / "procedures" / "email_outbox_stats.sql"
    stats.write_text(stats.read_text().replace("BEGIN\n", "BEGIN\n  -- changed by the test\n", 1))
    errors: list[int] = []
    done = threading.Event()

    def caller() -> None:
        repo = OutboxRepository.open(fresh_dsn)
        try:
            while not done.is_set():
                try:
                    repo.outbox_stats()
                except Exception as exc:
                    errors.append(getattr(exc.__cause__, "errno", -1))
        finally:
            repo.close()

    thread = threading.Thread(target=caller)
    thread.start()
    old = os.environ.get("EMAIL_OUTBOX_HOME")
    os.environ["EMAIL_OUTBOX_HOME"] = str(home)
    try:
        report = migrate(fresh_dsn)
    finally:
        if old is None:
            del os.environ["EMAIL_OUTBOX_HOME"]
        else:
            os.environ["EMAIL_OUTBOX_HOME"] = old
        done.set()
        thread.join()
    assert report.procedures_installed == ["email_outbox_stats"]
    assert not _drift(fresh_dsn).clean  # type: ignore[attr-defined]  # differs from the real procedures/
    if "mariadb" in server.version.lower():
        assert errors == [], "CREATE OR REPLACE must leave no moment with the procedure missing"
    else:
        assert set(errors) <= {1305}, "MySQL: DROP + CREATE may show 1305 for a moment, nothing else"


def test_concurrent_apply_from_three_processes(fresh_dsn: DatabaseDsn) -> None:
    procs = [
        subprocess.Popen(
            [*CLI, "migrate"], env=_env(fresh_dsn), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1] for o in outputs]
    applied = sum(o[0].count("applied migration 0001_schema") for o in outputs)
    assert applied == 1, "exactly one migrator applies the schema; the others find it done"
    assert _drift(fresh_dsn).clean  # type: ignore[attr-defined]


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
def test_apply_after_migrator_killed_minus_9(fresh_dsn: DatabaseDsn, delay: float) -> None:
    proc = subprocess.Popen([*CLI, "migrate"], env=_env(fresh_dsn), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "acquired migration lock" in line:
            break
    time.sleep(delay)  # a kill at a few different moments of the run, not a wait for a condition
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    started = time.monotonic()
    rerun = subprocess.run(
        [*CLI, "migrate", "--lock-timeout", "20"],
        env=_env(fresh_dsn),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert time.monotonic() - started < 20, "the killed migrator's lock must not block the next run"
    assert _drift(fresh_dsn).clean  # type: ignore[attr-defined]
    repo = OutboxRepository.open(fresh_dsn)
    try:
        assert repo.enqueue("after-kill", "a@b.c", "s", text_body="x").affected == 1
        assert len(repo.events(repo.get_row_by_notification_id("after-kill").id)) == 1
    finally:
        repo.close()


def test_drift_guard_reports_changed_body_params_and_missing(fresh_dsn: DatabaseDsn) -> None:
    migrate(fresh_dsn)
    assert _drift(fresh_dsn).clean  # type: ignore[attr-defined]
    conn = connect(fresh_dsn)
    try:
        cur = conn.cursor()
        cur.execute("DROP PROCEDURE email_extend_lease")
        cur.execute("DROP PROCEDURE email_finalize_sent")
        cur.execute(
            "CREATE PROCEDURE email_finalize_sent(IN p_id BIGINT, IN p_claim_token TEXT, "
            "IN p_provider_message_id TEXT)\nBEGIN\n  SELECT 1 AS affected;\nEND"
        )
        cur.execute("DROP PROCEDURE email_release_claim")
        cur.execute(
            "CREATE PROCEDURE email_release_claim(IN p_id BIGINT, IN p_claim_token TEXT, "
            "IN p_delay_seconds INT)\n" + load_procedures_by_name()["email_release_claim"].body
        )
    finally:
        conn.close()
    report = _drift(fresh_dsn)
    assert report.missing == ["email_extend_lease"]  # type: ignore[attr-defined]
    assert report.changed["email_finalize_sent"] == "body"  # type: ignore[attr-defined]
    assert report.changed["email_release_claim"] == "parameters"  # type: ignore[attr-defined]
    migrate(fresh_dsn)
    assert _drift(fresh_dsn).clean  # type: ignore[attr-defined]


def load_procedures_by_name() -> dict[str, object]:
    return {p.name: p for p in load_procedures()}  # type: ignore[misc]


def test_installed_parameters_match_files(dsn: DatabaseDsn) -> None:
    """The public contract's parameter order, read back from information_schema.PARAMETERS."""
    conn = connect(dsn)
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT SPECIFIC_NAME, GROUP_CONCAT(PARAMETER_NAME ORDER BY ORDINAL_POSITION)"
            " FROM information_schema.PARAMETERS WHERE SPECIFIC_SCHEMA = DATABASE()"
            " AND PARAMETER_MODE IS NOT NULL GROUP BY SPECIFIC_NAME"
        )
        installed = {str(n): str(p) for n, p in cur.fetchall()}  # type: ignore[misc]
    finally:
        conn.close()
    assert installed["email_enqueue"] == (
        "p_notification_id,p_to_address,p_from_address,p_subject,"
        "p_text_body,p_html_body,p_max_attempts,p_send_after"
    )
    assert installed["email_finalize_failure"] == (
        "p_id,p_claim_token,p_permanent,p_error_code,p_error_message,p_retry_delay_seconds"
    )
    assert installed["email_claim_batch"] == "p_claim_token,p_claimed_by,p_lease_seconds,p_limit"
    assert installed["email_resolve_unknown_outcome"] == (
        "p_id,p_outcome,p_resolved_by,p_reason,p_provider_message_id"
    )
    for proc in load_procedures():
        assert installed.get(proc.name, "") == ",".join(p.name for p in proc.parameters)


def test_status_enum_matches_column(dsn: DatabaseDsn) -> None:
    conn = connect(dsn)
    try:
        cur = conn.cursor()
        for table, column in [("email_delivery_attempts", "status"), ("email_delivery_events", "to_status")]:
            cur.execute(
                "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
                " AND TABLE_NAME = %s AND COLUMN_NAME = %s",
                (table, column),
            )
            column_type = str(cur.fetchone()[0])  # type: ignore[index]
            assert column_type == "enum(" + ",".join(f"'{s.value}'" for s in Status) + ")"
    finally:
        conn.close()


def test_tables_are_utf8mb4_innodb(dsn: DatabaseDsn) -> None:
    conn = connect(dsn)
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT TABLE_NAME, ENGINE, TABLE_COLLATION FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME LIKE 'email\\_%'"
        )
        rows = cur.fetchall()
    finally:
        conn.close()
    names = {str(r[0]) for r in rows}  # type: ignore[index]
    assert {"email_delivery_attempts", "email_delivery_events", "email_allowed_senders", "email_attachments",
            "email_allowed_senders_log", "email_outbox_migration_lock", "email_provider_events",
            "email_delivery_status", "email_suppressed_addresses", "email_suppressed_addresses_log"} <= names, names  # fmt: skip
    for _name, engine, collation in rows:  # type: ignore[misc]
        assert engine == "InnoDB" and str(collation).startswith("utf8mb4")


def test_migrate_refuses_unreachable_server() -> None:
    out = subprocess.run(
        [*CLI, "migrate", "--dsn", "mysql://root@127.0.0.1:1/nowhere"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "cannot connect" in out.stderr
    with pytest.raises(mysql.connector.Error):
        mysql.connector.connect(host="127.0.0.1", port=1, user="root", connection_timeout=2)


def test_a_failing_step_reports_the_servers_error_and_the_next_run_succeeds(
    server: TestServer,
    fresh_dsn: DatabaseDsn,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """yoyo's savepoint around a step died with the step's implicit DDL commit, and a failure surfaced
    as `1305 SAVEPOINT sp_N does not exist`. The server's own error must reach the user."""
    user = f"eo_noalter_{uuid.uuid4().hex[:8]}"
    conn = server.admin_connection()
    cursor = conn.cursor()
    cursor.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'No-alter-pass-1'")
    # Everything a migration needs but ALTER, which 0002 uses: the first run fails part-way.
    cursor.execute(
        "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, INDEX, CREATE ROUTINE, ALTER ROUTINE, EXECUTE,"
        f" CREATE TEMPORARY TABLES, TRIGGER ON `{fresh_dsn.database}`.* TO '{user}'@'%'"
    )
    account = DatabaseDsn(user, "No-alter-pass-1", fresh_dsn.host, fresh_dsn.port, fresh_dsn.database)
    monkeypatch.setenv("EMAIL_OUTBOX_DSN", account.url())
    try:
        assert main(["migrate"]) == 1
        errors = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(errors) == 1 and "error 1142" in errors[0] and "ALTER command denied" in errors[0], errors
        assert "SAVEPOINT" not in errors[0]
        cursor.execute(f"GRANT ALTER ON `{fresh_dsn.database}`.* TO '{user}'@'%'")
        assert main(["migrate"]) == 0
        assert migrate(account).applied == []
    finally:
        cursor.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        conn.close()


def test_migrate_refuses_a_read_only_server_before_changing_anything(
    server: TestServer, fresh_dsn: DatabaseDsn
) -> None:
    conn = server.admin_connection()
    cursor = conn.cursor()
    cursor.execute("SET GLOBAL read_only = ON")
    try:
        with pytest.raises(MigrationError, match=r"read_only=ON.*writer endpoint"):
            migrate(fresh_dsn)
    finally:
        cursor.execute("SET GLOBAL read_only = OFF")
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME LIKE 'email%%'",
        (fresh_dsn.database,),
    )
    assert cursor.fetchone()[0] == 0, "nothing was created"
    conn.close()


def test_upgrade_with_old_triggers_names_the_setting_before_changing_anything(tmp_path: Path) -> None:
    """With the binary log on and log_bin_trust_function_creators=0, DROP TRIGGER needs SUPER too (1419):
    an install from before 0002 cannot be upgraded by a non-SUPER admin until the setting is 1."""
    from tests.support.servers import BINLOG_ARGS, managed_database, query, start_server

    server = start_server(tmp_path, *BINLOG_ARGS)
    try:
        dsn = managed_database(server)
        assert migrate(dsn).applied  # a fresh install needs no SUPER
        # Make it an install from before 0002: the old trigger present, 0002 not yet recorded.
        query(server, "SET GLOBAL log_bin_trust_function_creators = 1")
        query(
            server,
            "CREATE TRIGGER outbox.email_delivery_attempts_audit_update AFTER UPDATE"
            " ON outbox.email_delivery_attempts FOR EACH ROW SET @old_trigger_ran = 1",
        )
        query(server, "DELETE FROM outbox._yoyo_migration WHERE migration_id = '0002_audit_in_procedures'")
        query(server, "SET GLOBAL log_bin_trust_function_creators = 0")

        with pytest.raises(MigrationError, match=r"log_bin_trust_function_creators=1.*parameter group"):
            migrate(dsn)
        left = query(
            server, "SELECT COUNT(*) AS n FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'outbox'"
        )
        assert left[0]["n"] == 1, "nothing changed"

        query(server, "SET GLOBAL log_bin_trust_function_creators = 1")
        assert migrate(dsn).applied == ["0002_audit_in_procedures"]
        left = query(
            server, "SELECT COUNT(*) AS n FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = 'outbox'"
        )
        assert left[0]["n"] == 0
    finally:
        server.stop()


PRE_0009 = Path(__file__).parent / "pre_0009"


def test_upgrade_from_before_0009_keeps_rows_and_retires_the_old_names(
    fresh_dsn: DatabaseDsn,
) -> None:
    """An installation from before 0009 (its claim procedures as they were: tests/contract/pre_0009,
    the internal email_internal_claim_v2 among them, none of the new names) upgrades with `migrate`:
    its rows stay and are claimed in the one row shape, email_internal_claim_v2 is gone (0009), and so
    are the names 0.1.0 deprecated (0016)."""
    from email_outbox import Message, enqueue_message
    from email_outbox.schema.routines import sync_procedures

    migrate(fresh_dsn)
    repo = OutboxRepository.open(fresh_dsn)
    try:
        whole = enqueue_message(
            repo.connection,
            "before-0009",
            Message(to=["a@example.com"], cc=["c@example.com"], subject="s", text="t"),
        ).attempt_id
        plain = repo.enqueue("before-0009-plain", "b@example.com", "s", text_body="t").attempt_id
    finally:
        repo.close()
    conn = connect(fresh_dsn)
    try:
        cur = conn.cursor()
        cur.execute(
            "DELETE FROM _yoyo_migration WHERE migration_id IN ('0009_one_claim_shape', '0016_flat_send_path')"
        )
        for name in (
            "email_claim_batch_bounded",
            "email_internal_claim_rows",
            "email_internal_drop_suppressed_row",
        ):
            cur.execute(f"DROP PROCEDURE IF EXISTS {name}")
        assert sorted(sync_procedures(cur, PRE_0009)) == sorted(p.stem for p in PRE_0009.glob("*.sql"))
        conn.commit()
    finally:
        conn.close()
    assert "email_internal_claim_v2" in _routines(fresh_dsn)

    report = migrate(fresh_dsn)
    assert "0009_one_claim_shape" in report.applied
    routines = _routines(fresh_dsn)
    assert "email_internal_claim_v2" not in routines, "the renamed internal procedure is retired"
    assert "email_claim_batch_bounded" in routines
    assert not {"email_claim_batch_v2", "email_purge_bodies"} & set(routines), (
        "0.1.0's deprecated names retired"
    )
    assert _drift(fresh_dsn).clean  # type: ignore[attr-defined]

    repo = OutboxRepository.open(fresh_dsn)
    try:
        cursor = repo.connection.cursor(dictionary=True)
        cursor.execute(
            "CALL email_claim_batch_bounded(%s, %s, %s, %s, %s)", (uuid.uuid4().hex, "old-worker", 60, 1, 0)
        )
        (old_name,) = cursor.fetchall()
        while cursor.nextset():
            pass
        assert old_name["id"] == whole and old_name["text_body"] is None, "the bounded claim, as it was"
        assert '"c@example.com"' in old_name["message_options"]
        (claimed,) = repo.claim_batch(uuid.uuid4().hex, "new-worker", 60, 10)
        assert claimed.id == plain and claimed.message_options is None and claimed.text_body == "t"
        assert repo.purge_bodies(0, 10) == 0, "the keyset purge answers"
        assert repo.get_row(whole).status is Status.PROCESSING
    finally:
        repo.close()


def test_upgrade_retires_the_claims_internal_procedures_and_leaves_no_procedure_without_a_file(
    fresh_dsn: DatabaseDsn,
) -> None:
    """A 0.1.0 installation still has the internal procedures its claims called; the claims are now
    assembled from fragments, so `migrate` (0016b) drops them, and after it every installed procedure
    is one of procedures/ (the drift report's `extra` is empty)."""
    retired = ("email_internal_claim_rows", "email_internal_claim_batch", "email_internal_check_token")
    migrate(fresh_dsn)
    conn = connect(fresh_dsn)
    try:
        cur = conn.cursor()
        for name in retired:
            cur.execute(f"CREATE PROCEDURE {name}() BEGIN SELECT 1; END")
        cur.execute("DELETE FROM _yoyo_migration WHERE migration_id = '0016b_flat_claim'")
        conn.commit()
    finally:
        conn.close()
    assert set(retired) <= set(_routines(fresh_dsn))

    report = migrate(fresh_dsn)
    assert "0016b_flat_claim" in report.applied
    assert not set(retired) & set(_routines(fresh_dsn))
    assert _drift(fresh_dsn).extra == []  # type: ignore[attr-defined]


def test_upgrade_drops_the_unread_claim_indexes_after_replacing_the_procedures_that_name_them(
    fresh_dsn: DatabaseDsn,
) -> None:
    """0024 drops the two claim indexes no statement reads any more. An older release's procedure that
    still forces one by name is replaced by its file first, so it never meets a missing index; the
    claim and the operators' queue health answer as before."""
    dropped = {"ix_email_delivery_attempts_claim", "ix_email_delivery_attempts_claim_order"}
    migrate(fresh_dsn)
    repo = OutboxRepository.open(fresh_dsn)
    try:
        attempt = repo.enqueue("before-0024", "a@example.com", "s", text_body="t").attempt_id
    finally:
        repo.close()
    conn = connect(fresh_dsn)
    try:
        cur = conn.cursor()
        cur.execute(
            "ALTER TABLE email_delivery_attempts ADD INDEX ix_email_delivery_attempts_claim (claim_due_at, id),"
            " ADD INDEX ix_email_delivery_attempts_claim_order (claim_rank, claim_due_at, id)"
        )
        # An older body of a real procedure, reading one of them by name.
        cur.execute("DROP PROCEDURE email_claimable_candidates")
        cur.execute(
            "CREATE PROCEDURE email_claimable_candidates(IN p_limit BIGINT) BEGIN"
            " SELECT id FROM email_delivery_attempts FORCE INDEX (ix_email_delivery_attempts_claim_order)"
            " WHERE claim_due_at <= UTC_TIMESTAMP(6) LIMIT p_limit; END"
        )
        cur.execute("DELETE FROM _yoyo_migration WHERE migration_id = '0024_drop_unused_claim_indexes'")
        conn.commit()
    finally:
        conn.close()

    assert "0024_drop_unused_claim_indexes" in migrate(fresh_dsn).applied
    conn = connect(fresh_dsn)
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = 'email_delivery_attempts'"
        )
        assert not dropped & {str(r[0]) for r in cur.fetchall()}  # type: ignore[index]
    finally:
        conn.close()
    assert _drift(fresh_dsn).clean  # type: ignore[attr-defined]
    repo = OutboxRepository.open(fresh_dsn)
    try:
        assert [c.id for c in repo.claimable_candidates(10)] == [attempt]
        assert repo.queue_health().oldest_due_at is not None
    finally:
        repo.close()
