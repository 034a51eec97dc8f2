"""The console's connections: a small pool that lends one per request, each opened with the statement
time limit that bounds every read (`max_statement_time` on MariaDB, `max_execution_time` on MySQL)."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from contextlib import contextmanager

from email_outbox.db.console_reads import ConsoleReads, cursor_of
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.schema.grants import CONSOLE_ACTIONS, CONSOLE_BREAKER_CLOSE, CONSOLE_CANCEL

# An idle connection older than this is pinged before it is lent again.
IDLE_CHECK_SECONDS = 30.0


class ConsoleDatabase:
    """A pool of connections; each `session()` lends one, dropped instead of returned after an error."""

    def __init__(self, dsn: DatabaseDsn, *, statement_timeout_seconds: float = 5.0, idle: int = 8) -> None:
        self.dsn = dsn
        self.statement_timeout_seconds = statement_timeout_seconds
        self._idle: queue.LifoQueue[tuple[float, OutboxRepository]] = queue.LifoQueue(maxsize=idle)
        self.tables: set[str] = set()
        self.can_act = False
        self.can_cancel = False
        self.can_close_breaker = False
        self.flavour = "unknown"

    def start(self) -> None:
        """Connects once: what the server is, which optional tables exist, whether this account may act."""
        with self.session() as reads:
            self.tables = reads.visible_tables()
            installed = reads.repo.installed_procedures()
            self.can_act = set(CONSOLE_ACTIONS) <= installed
            self.can_cancel = CONSOLE_CANCEL in installed
            self.can_close_breaker = CONSOLE_BREAKER_CLOSE in installed

    def _open(self) -> OutboxRepository:
        repo = OutboxRepository.open(self.dsn)
        with cursor_of(repo) as cursor:
            cursor.execute("SELECT VERSION() AS v")
            version = str(cursor.fetchall()[0]["v"])
            if "mariadb" in version.lower():
                self.flavour = "MariaDB"
                cursor.execute("SET SESSION max_statement_time = %s", (self.statement_timeout_seconds,))
            else:
                self.flavour = "MySQL"
                cursor.execute(
                    "SET SESSION max_execution_time = %s", (int(self.statement_timeout_seconds * 1000),)
                )
            cursor.execute("SET SESSION time_zone = '+00:00'")
        repo.read_consistently()
        return repo

    @contextmanager
    def session(self) -> Iterator[ConsoleReads]:
        repo = self._checkout()
        ok = False
        try:
            yield ConsoleReads(repo, self.tables)
            ok = True
        finally:
            if ok:
                try:
                    self._idle.put_nowait((time.monotonic(), repo))
                except queue.Full:
                    repo.close()
            else:
                repo.close()

    def _checkout(self) -> OutboxRepository:
        """An idle connection, checked with a ping when it has idled a while (the server may have
        closed it: wait_timeout, a failover), or a new one."""
        while True:
            try:
                since, repo = self._idle.get_nowait()
            except queue.Empty:
                return self._open()
            if time.monotonic() - since < IDLE_CHECK_SECONDS:
                return repo
            try:
                if repo.connection.is_connected():
                    return repo
            except Exception:  # a dead connection, whatever the driver raises
                pass
            repo.close()

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait()[1].close()
            except queue.Empty:
                return
