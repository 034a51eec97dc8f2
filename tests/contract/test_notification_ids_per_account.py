"""Notification ids are per enqueuing account (issue 25, finding 2): one service cannot take another's id
by enqueuing it first, and an installation from before migration 0010 keeps its rows and their accounts."""

from __future__ import annotations

import os

import mysql.connector

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.schema.migrate import migrate
from tests.conftest import ROLE_PASSWORD
from tests.support.harness import TestServer
from tests.support.helpers import scalar


def _enqueuer_on(server: TestServer, dsn: DatabaseDsn, user: str) -> DatabaseDsn:
    os.environ["TEST_ROLE_ROLE_PASSWORD"] = ROLE_PASSWORD
    try:
        code = main(
            [
                "grant",
                "enqueuer",
                f"{user}@%",
                "--dsn",
                dsn.url(),
                "--create",
                "--password-env",
                "TEST_ROLE_ROLE_PASSWORD",
            ]
        )
    finally:
        del os.environ["TEST_ROLE_ROLE_PASSWORD"]
    assert code == 0
    return DatabaseDsn(user, ROLE_PASSWORD, dsn.host, dsn.port, dsn.database, dsn.unix_socket)


def _drop_user(server: TestServer, user: str) -> None:
    conn = server.admin_connection()
    conn.cursor().execute(f"DROP USER IF EXISTS '{user}'@'%'")
    conn.close()


def test_another_account_enqueuing_the_same_id_first_does_not_take_it(
    accounts: dict[str, DatabaseDsn], repo: OutboxRepository
) -> None:
    other_service = OutboxRepository.open(accounts["enqueuer"])
    try:
        theirs = other_service.enqueue("password-reset:user-7", "mallory@example.com", "Reset", text_body="x")
        assert theirs.affected == 1
        ours = repo.enqueue("password-reset:user-7", "user7@example.com", "Reset", text_body="your link")
        assert ours.affected == 1, "our enqueue was answered as the other account's duplicate"
        assert ours.attempt_id != theirs.attempt_id
        assert repo.get_row(ours.attempt_id).to_address == "user7@example.com"
        # Each account's retry is still its own duplicate.
        again = other_service.enqueue("password-reset:user-7", "mallory@example.com", "Reset", text_body="x")
        assert (again.affected, again.attempt_id) == (0, theirs.attempt_id)
        mine_again = repo.enqueue(
            "password-reset:user-7", "user7@example.com", "Reset", text_body="your link"
        )
        assert (mine_again.affected, mine_again.attempt_id) == (0, ours.attempt_id)
    finally:
        other_service.close()
    stored = accounts_of_rows(repo)
    assert stored == {theirs.attempt_id: accounts["enqueuer"].user, ours.attempt_id: repo_user(repo)}


def accounts_of_rows(repo: OutboxRepository) -> dict[int, str]:
    cursor = repo.connection.cursor()
    cursor.execute("SELECT id, account FROM email_delivery_attempts")
    found = {int(row[0]): str(row[1]) for row in cursor.fetchall()}  # type: ignore[index]
    cursor.close()
    return found


def repo_user(repo: OutboxRepository) -> str:
    return str(scalar(repo, "SELECT SUBSTRING_INDEX(SESSION_USER(), '@', 1)"))


def test_show_by_a_notification_id_two_accounts_use_asks_which(
    accounts: dict[str, DatabaseDsn], repo: OutboxRepository, dsn: DatabaseDsn, capsys: object
) -> None:
    other_service = OutboxRepository.open(accounts["enqueuer"])
    try:
        other_service.enqueue("shared-id", "a@example.com", "s", text_body="x")
    finally:
        other_service.close()
    ours = repo.enqueue("shared-id", "b@example.com", "s", text_body="x")
    assert main(["show", "--notification-id", "shared-id", "--dsn", dsn.url()]) != 0
    user = repo_user(repo)
    assert (
        main(["show", "--notification-id", "shared-id", "--account", user, "--dsn", dsn.url(), "--json"]) == 0
    )
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert f'"id": {ours.attempt_id}' in out


def _as_before_0010(dsn: DatabaseDsn) -> None:
    """Put a migrated database back to its shape before 0010: no account column, the id alone unique."""
    conn = mysql.connector.connect(**dsn.connect_args(), autocommit=True)
    cursor = conn.cursor()
    cursor.execute(
        "ALTER TABLE email_delivery_attempts DROP KEY uq_email_delivery_attempts_notification_account,"
        " DROP COLUMN account, ADD UNIQUE KEY uq_email_delivery_attempts_notification_id (notification_id)"
    )
    cursor.execute("DROP TABLE email_allowed_configuration_sets, email_allowed_configuration_sets_log")
    cursor.execute("DELETE FROM _yoyo_migration WHERE migration_id = '0010_security_review'")
    conn.close()


def test_upgrade_keeps_every_row_and_learns_its_account_from_its_history(
    server: TestServer, fresh_dsn: DatabaseDsn
) -> None:
    migrate(fresh_dsn)
    user = "eo_upgrade_enqueuer"
    _drop_user(server, user)
    enqueuer = _enqueuer_on(server, fresh_dsn, user)
    try:
        app = OutboxRepository.open(enqueuer)
        admin = OutboxRepository.open(fresh_dsn)
        try:
            known = app.enqueue("order-1", "a@example.com", "s", text_body="x").attempt_id
            legacy = app.enqueue("order-2", "b@example.com", "s", text_body="x").attempt_id
            # A message waiting with its own configuration set, named before sets had to be allowed.
            admin.configuration_set_add("legacy-set", "test", "in use before 0010")
            document = (
                '{"to": ["c@example.com"], "subject": "s", "text": "t", "configuration_set": "legacy-set"}'
            )
            waiting = app.enqueue_message("order-3", document).attempt_id
            _as_before_0010(fresh_dsn)
            # A row whose history is gone: its account cannot be known.
            admin.connection.cursor().execute(
                "DELETE FROM email_delivery_events WHERE attempt_id = %s", (legacy,)
            )
            admin.connection.commit()

            assert migrate(fresh_dsn).applied == ["0010_security_review"]

            assert accounts_of_rows(admin) == {known: user, legacy: "", waiting: user}
            # The set the waiting message names is on the list, so it is sent as it was enqueued.
            assert [s.name for s in admin.allowed_configuration_sets()] == ["legacy-set"]
            # The owner's retry is its duplicate; another account's same id is a new email ...
            assert app.enqueue("order-1", "a@example.com", "s", text_body="x").attempt_id == known
            assert admin.enqueue("order-1", "a@example.com", "s", text_body="x").affected == 1
            # ... but a legacy row answers every account as before, so nothing is sent twice.
            assert admin.enqueue("order-2", "b@example.com", "s", text_body="x").attempt_id == legacy
            assert app.enqueue("order-2", "b@example.com", "s", text_body="x").attempt_id == legacy
        finally:
            app.close()
            admin.close()
    finally:
        _drop_user(server, user)
