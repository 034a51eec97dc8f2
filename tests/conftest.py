"""Shared fixtures: one real database server per session, a clean migrated schema per test."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from tests.support.harness import TestServer, start_private_test_server, start_test_server

_server: TestServer | None = None
# Read when the server starts: at the end of a run the server may be gone (a test killed it).
_server_line: str | None = None
_names = itertools.count(1)
ROLE_PASSWORD = "s3cret-Pass"
# tests/contract/test_other_languages.py: language -> "ran" or "SKIP: reason", printed at the end of the run.
OTHER_LANGUAGES = pytest.StashKey[dict[str, str]]()


def get_test_server() -> TestServer:
    global _server, _server_line
    if _server is None:
        _server = start_test_server()
        _server_line = (
            f"database: {_server.kind}, server version {_server.version}, at {_server.admin.redacted()}"
        )
    return _server


# The tiers are folders; the markers say what a test needs, so `pytest -m "not cluster"` or
# `pytest -m "not db"` selects by need. A test needs the database when it asks for the server fixture
# (directly or through dsn, repo, ...) or its tier starts servers of its own.
_TIERS_THAT_START_SERVERS = {"cluster", "contract", "system"}
_TIER_MARKERS = {"cluster": ("cluster", "slow"), "console": ()}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = item.path.parent.name
        if "server" in getattr(item, "fixturenames", ()) or tier in _TIERS_THAT_START_SERVERS:
            item.add_marker(pytest.mark.db)
        for name in _TIER_MARKERS.get(tier, ()):
            item.add_marker(getattr(pytest.mark, name))
        if item.path.name == "test_console_browser.py":
            item.add_marker(pytest.mark.browser)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _server_line is not None:
        terminalreporter.write_line(_server_line)
    outcomes = config.stash.get(OTHER_LANGUAGES, {})
    if outcomes:
        ran = [language for language, outcome in outcomes.items() if outcome == "ran"]
        skipped = [f"{language} ({outcome})" for language, outcome in outcomes.items() if outcome != "ran"]
        terminalreporter.write_line(
            f"docs/examples ran in: {', '.join(ran) or 'no language'}"
            + (f"; skipped: {'; '.join(skipped)}" if skipped else "")
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    if _server is not None:
        _server.close()


@pytest.fixture(scope="session")
def server() -> TestServer:
    return get_test_server()


@pytest.fixture(scope="session")
def shared_dsn(server: TestServer) -> DatabaseDsn:
    """One migrated database for the whole session; `dsn` empties it before each test."""
    return server.migrated_database("email_outbox_test")


@pytest.fixture
def dsn(server: TestServer, shared_dsn: DatabaseDsn) -> DatabaseDsn:
    server.truncate(shared_dsn)
    return shared_dsn


@pytest.fixture
def fresh_dsn(server: TestServer) -> DatabaseDsn:
    """An empty, unmigrated database of this test's own."""
    return server.create_database(f"email_outbox_fresh_{next(_names)}")


@pytest.fixture
def killable_server() -> Iterator[TestServer]:
    """A private server of this test's own, which the test may kill -9 and start again."""
    server = start_private_test_server()
    yield server
    server.close()


@pytest.fixture
def accounts(server: TestServer, dsn: DatabaseDsn) -> Iterator[dict[str, DatabaseDsn]]:
    """Three fresh accounts, created and granted by `email-outbox grant`, dropped afterwards."""
    suffix = uuid.uuid4().hex[:8]
    made: dict[str, DatabaseDsn] = {}
    os.environ["TEST_ROLE_ROLE_PASSWORD"] = ROLE_PASSWORD
    try:
        for role in ("enqueuer", "worker", "operator"):
            user = f"eo_{role}_{suffix}"
            code = main(
                [
                    "grant",
                    role,
                    f"{user}@%",
                    "--dsn",
                    dsn.url(),
                    "--create",
                    "--password-env",
                    "TEST_ROLE_ROLE_PASSWORD",
                ]
            )
            assert code == 0
            made[role] = DatabaseDsn(user, ROLE_PASSWORD, dsn.host, dsn.port, dsn.database, dsn.unix_socket)
        yield made
    finally:
        del os.environ["TEST_ROLE_ROLE_PASSWORD"]
        conn = server.admin_connection()
        cursor = conn.cursor()
        for account_dsn in made.values():
            cursor.execute(f"DROP USER IF EXISTS '{account_dsn.user}'@'%'")
        conn.close()


@pytest.fixture
def repo(dsn: DatabaseDsn) -> Iterator[OutboxRepository]:
    repository = OutboxRepository.open(dsn)
    yield repository
    repository.close()


@pytest.fixture
def open_repo(dsn: DatabaseDsn) -> Iterator[object]:
    """A factory of extra repositories on separate connections, all closed at the end."""
    opened: list[OutboxRepository] = []

    def factory() -> OutboxRepository:
        repository = OutboxRepository.open(dsn)
        opened.append(repository)
        return repository

    yield factory
    for repository in opened:
        repository.close()


def set_clock(repo: OutboxRepository, when: datetime | None) -> None:
    """Move this session's database clock (UTC_TIMESTAMP) to `when`; None returns to real time."""
    cursor = repo.connection.cursor()
    cursor.execute("SET time_zone = '+00:00'")
    if when is None:
        cursor.execute("SET timestamp = DEFAULT")
    else:
        cursor.execute("SET timestamp = UNIX_TIMESTAMP(%s)", (when.strftime("%Y-%m-%d %H:%M:%S.%f"),))
    cursor.close()


def db_now(repo: OutboxRepository) -> datetime:
    cursor = repo.connection.cursor()
    cursor.execute("SELECT UTC_TIMESTAMP(6)")
    value = cursor.fetchone()[0]  # type: ignore[index]
    cursor.close()
    return value  # type: ignore[no-any-return]
