"""Every procedure call the worker makes, and the one policy that decides which failures are retried.

The policy (docs/design.md section 8):
- deadlock, lock wait timeout, snapshot or certification conflict, a Galera node not ready
  (TransientDatabaseError): the call was rolled back; retried up to `transient_attempts` times; a node
  not ready (1047: outside the Primary Component, or joining) is left for another host of the DSN;
- a lost connection (DatabaseUnavailable: also a node that stopped answering within the read timeout,
  or one that left the Primary Component under a COMMIT, 1180; a write a read-only replica refused,
  which changed nothing) or a procedure missing for a moment (SchemaNotInstalled:
  MySQL 8 redeploys a procedure as DROP + CREATE): reconnect and retry until the call's deadline,
  the end of the lease for a call about a claimed row; a call without a deadline (the claim) raises
  at once and its caller backs off;
- a lock wait timeout (1205: another session holds the row) on the connection the finalizes share is
  raised at once, never waited out there: the finalizer lands that row apart (`apart`), where a lock
  wait is retried until the call's deadline, so one locked row holds up no other row's finalize;
- anything else is raised.
Pauses between tries grow exponentially with jitter, up to `max_pause`. Once `give_up` says so (a
stopping worker's grace is over), no call tries again: each ends with its current try.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from email_outbox.db.connection import ER_LOCK_WAIT_TIMEOUT, ER_WSREP_NOT_READY, mark_failed
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import (
    DatabaseUnavailable,
    InvalidInput,
    OutboxError,
    ReadOnlyServer,
    SchemaNotInstalled,
    TransientDatabaseError,
)
from email_outbox.worker.stats import WorkerStats

log = logging.getLogger("email_outbox.worker")

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    # Sized for a cluster, where a third of claims may meet a certification conflict under load.
    transient_attempts: int = 10
    first_pause: float = 0.05
    max_pause: float = 2.0

    def pause(self, tries: int, rng: random.Random) -> float:
        return min(math.ldexp(self.first_pause, min(tries - 1, 30)), self.max_pause) * (0.5 + rng.random())


RETRY_POLICY = RetryPolicy()


# What the worker logs when it retries a call; the soak (bench/soak.py) counts these lines.
TRANSIENT_RETRY_MESSAGE = "retrying after a transient database error"
LOST_CONNECTION_RETRY_MESSAGE = "database call failed, retrying"


class _OneConnection:
    """Where callers that take turns keep their one connection (in place of a thread-local)."""

    repo: OutboxRepository | None = None


class DatabaseCalls:
    """One connection per thread, opened on first use and dropped when it fails; or, from
    `taking_turns`, one connection for all the threads of callers that never call at once."""

    def __init__(
        self,
        open_repository: Callable[[], OutboxRepository],
        dsn: DatabaseDsn,
        stats: WorkerStats,
        rng: random.Random,
        *,
        give_up: Callable[[], bool] = lambda: False,
        policy: RetryPolicy = RETRY_POLICY,
    ) -> None:
        self.open_repository = open_repository
        self._dsn = dsn
        self._stats = stats
        self._rng = rng
        self._give_up = give_up
        self.policy = policy
        self._local: threading.local | _OneConnection = threading.local()
        # An error that is neither a refusal nor handled by the policy may leave a connection unusable
        # (an unread result, commands out of sync): one shared by every finalize is then replaced.
        self._shared = False
        self._waits_out_locks = False

    def taking_turns(self) -> DatabaseCalls:
        """The same calls under the same policy on one connection of their own, for callers that never
        call at once (the finalizer: its group commit lands one call at a time). The server then meets
        one busy connection instead of one per send slot, each woken from sleep for every call
        (docs/performance.md measures what that saves)."""
        twin = self._twin()
        twin._shared = True
        return twin

    def apart(self) -> DatabaseCalls:
        """The same calls under the same policy on a short-lived connection of their own (`drop` it when
        done), for one row whose call met another session's lock on the shared connection: a lock wait
        there is retried until the call's deadline, holding up that row only."""
        twin = self._twin()
        twin._waits_out_locks = True
        return twin

    def _twin(self) -> DatabaseCalls:
        twin = DatabaseCalls(
            self.open_repository, self._dsn, self._stats, self._rng, give_up=self._give_up, policy=self.policy
        )
        twin._local = _OneConnection()
        return twin

    def repository(self) -> OutboxRepository:
        repo: OutboxRepository | None = getattr(self._local, "repo", None)
        if repo is None:
            repo = self.open_repository()
            self._local.repo = repo
            # A DSN may list several hosts: count each connection that went to another than the first.
            if self._dsn.alternates:
                endpoint = (
                    str(getattr(repo.connection, "server_host", "")),
                    int(getattr(repo.connection, "server_port", 0)),
                )
                if endpoint != (self._dsn.host, self._dsn.port):
                    self._stats.add("db_errors", "connected_to_later_host")
        return repo

    def drop(self, *, host_failed: bool = False) -> None:
        """Close this thread's connection (or the one of callers taking turns); the next call opens a
        new one, to another host of the DSN first when this one's host failed."""
        repo: OutboxRepository | None = getattr(self._local, "repo", None)
        if repo is not None:
            if host_failed:
                mark_failed(getattr(repo, "connection", None))
            repo.close()
        self._local.repo = None

    def call(
        self,
        what: str,
        op: Callable[[OutboxRepository], T],
        *,
        deadline: float | None = None,
        losses: list[str] | None = None,
    ) -> T:
        """`op` on this thread's connection (or the one of callers taking turns), under the retry
        policy. A lost connection is appended to `losses`: the caller then knows an earlier try may
        have committed."""
        transient = tries = 0
        while True:
            tries += 1
            pause = self.policy.pause(tries, self._rng)
            try:
                result = op(self.repository())
                self._stats.last_db_success = time.monotonic()
                return result
            except TransientDatabaseError as exc:
                # Counted by the server's error code: on a Galera cluster 1213 is a certification
                # conflict, normal under load, and its rate is worth watching apart from 1205 or 1047.
                self._stats.add("db_errors", str(exc.errno or "transient"))
                transient += 1
                if exc.errno == ER_WSREP_NOT_READY:
                    self.drop(host_failed=True)
                if exc.errno == ER_LOCK_WAIT_TIMEOUT and self._shared:
                    raise  # waited out here, it would hold up every other finalize: landed apart
                if self._give_up():
                    raise
                if transient > self.policy.transient_attempts and not (
                    exc.errno == ER_LOCK_WAIT_TIMEOUT
                    and self._waits_out_locks
                    and deadline is not None
                    and time.monotonic() + pause <= deadline
                    and not self._give_up()
                ):
                    raise
                log.warning(
                    TRANSIENT_RETRY_MESSAGE,
                    extra={"call": what, "error_code": exc.errno, "attempt": transient, "error": str(exc)},
                )
            except ReadOnlyServer as exc:
                # A replica not yet promoted, met through a DSN that lists it: refused before any
                # change, so nothing may have committed. Another host, as for a lost connection.
                self._stats.add("db_errors", "read_only")
                self.drop(host_failed=True)
                if deadline is None or time.monotonic() + pause > deadline or self._give_up():
                    raise DatabaseUnavailable(str(exc)) from exc
                log.warning(LOST_CONNECTION_RETRY_MESSAGE, extra={"call": what, "error": str(exc)})
            except (DatabaseUnavailable, SchemaNotInstalled) as exc:
                lost = isinstance(exc, DatabaseUnavailable)
                self._stats.add("db_errors", "unavailable" if lost else "procedure_missing")
                if lost:
                    self.drop(host_failed=True)
                    if losses is not None:
                        losses.append(str(exc))
                if deadline is None or time.monotonic() + pause > deadline or self._give_up():
                    raise
                log.warning(LOST_CONNECTION_RETRY_MESSAGE, extra={"call": what, "error": str(exc)})
            except InvalidInput:
                raise  # a procedure's refusal: the connection is as good as before
            except OutboxError:
                if self._shared:
                    self.drop()
                raise
            time.sleep(pause)
