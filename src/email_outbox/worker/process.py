"""A worker replica: the parts put together, the run from start-up to drained shutdown, and signals.

No database transaction is open during a send: every procedure call commits on its own
(docs/design.md sections 3 and 8).
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import TYPE_CHECKING

from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import OutboxError
from email_outbox.ses.account import AccountQuota, AccountReader, AccountUnreadable, SesAccount
from email_outbox.ses.sender import make_client
from email_outbox.version import PACKAGE_VERSION
from email_outbox.worker.actions import DelayPolicy
from email_outbox.worker.breaker import Breaker
from email_outbox.worker.budget import ByteBudget
from email_outbox.worker.claim import Claim
from email_outbox.worker.config import WorkerConfig
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.delivery import Delivery, Sender
from email_outbox.worker.finalizer import Finalizer
from email_outbox.worker.loop import ClaimLoop
from email_outbox.worker.pacing import Pacer
from email_outbox.worker.progress import ProgressLine
from email_outbox.worker.reservations import Reservations
from email_outbox.worker.shared_rate import SharedRate
from email_outbox.worker.slots import Slots
from email_outbox.worker.startup import REQUIRED_PROCEDURES, check_schema, start_metrics, wait_for_database
from email_outbox.worker.stats import WorkerStats
from email_outbox.worker.tenant_status import TenantStatusWatch, get_tenant_status

if TYPE_CHECKING:
    from email_outbox.metrics_server import MetricsServer

__all__ = ["REQUIRED_PROCEDURES", "Sender", "Worker"]

log = logging.getLogger("email_outbox.worker")


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        sender: Sender,
        *,
        repository_factory: Callable[[], OutboxRepository] | None = None,
        rng: random.Random | None = None,
        account: AccountReader | None = None,
    ) -> None:
        """`account` reads the SES account's quota (default: GetAccount with the sending client's
        conventions)."""
        self.config = config
        self.stats = WorkerStats()
        self.stopping = threading.Event()
        self._signals = 0
        rng = rng or random.Random()
        self.database = DatabaseCalls(
            repository_factory or (lambda: _worker_repository(config)),
            config.dsn,
            self.stats,
            rng,
            give_up=lambda: self._signals >= 2,
        )
        self.slots = Slots(config.concurrency, self.stats)
        account = account or _LazyAccount(config)
        self.shared_rate = SharedRate(config, self.database, self.stats, account)
        self.pacer = Pacer(config, self.stats, self.shared_rate)
        self.breaker = Breaker(config, self.database, self.stats, rng, provider_answers=_answers(account))
        self._finalizes = self.database.taking_turns()
        finalizer = Finalizer(self._finalizes, self.stats, lambda: self.slots.taken)
        self._reserver = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reserve")
        self.reservations = Reservations(
            config, self.database, finalizer, self.stats, self._reserver, self.pacer
        )
        self.delivery = Delivery(
            sender,
            self.database,
            finalizer,
            self.pacer,
            ByteBudget(config.body_memory_bytes),
            DelayPolicy.from_config(config),
            self.stats,
            self.stopping,
            rng,
            config.longest_send_seconds,
            self.breaker,
            config.worker_id,
        )
        self.loop = ClaimLoop(
            config,
            self.database,
            self.slots,
            self.pacer,
            self.stats,
            self.stopping,
            self.reservations,
            self.breaker,
        )
        self.progress = ProgressLine(self.stats, config.progress_interval)
        self.metrics_server: MetricsServer | None = None

    # --- signals ----------------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals >= 2:
            log.error("second signal: exiting at once; claimed rows go UnknownOutcome when their lease ends")
            os._exit(128 + signum)
        log.info("signal received: no more claims, finishing in-flight sends", extra={"signal": signum})
        self.request_stop()

    def request_stop(self) -> None:
        self.stopping.set()
        self.slots.wake()

    # --- the run ----------------------------------------------------------------------------------
    def run(self) -> int:
        config = self.config
        if config.metrics_port is not None:
            self.metrics_server = start_metrics(config, self.stats, self.database, self.stopping)
        wait_for_database(self.database, self.stopping)
        if self.stopping.is_set():
            return 0
        check_schema(self.database, config)
        self.shared_rate.refresh_account()
        if config.provider_enabled:
            TenantStatusWatch(
                self.database, config, lambda: get_tenant_status(make_client(config)), self.stopping
            ).start()
        log.info(
            "worker started",
            extra={
                "worker_id": config.worker_id,
                "concurrency": config.concurrency,
                "lease_seconds": config.lease_seconds,
                "version": PACKAGE_VERSION,
            },
        )
        executor = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="send")
        try:
            if not config.provider_enabled:
                self._idle_with_provider_disabled()
            self.loop.run(executor, self._deliver, self.progress.tick)
        finally:
            self._drain(executor)
            if self.metrics_server is not None:
                self.metrics_server.stop()
        self.progress.write()
        log.info("worker stopped", extra={"stats": self.stats.snapshot()})
        return 0

    def _deliver(self, claim: Claim) -> None:
        """Runs on a send slot: the claimed row, then the reservations this slot takes for itself while
        sends are slow, until there is none. The slot is held throughout and freed once, at the end."""
        next_claim: Claim | None = claim
        try:
            while next_claim is not None:
                current, next_claim = next_claim, None
                try:
                    next_claim = self.delivery.deliver(current, self.loop.next_for_held_slot)
                except Exception:
                    # Never lose the row silently: it stays Processing and the sweep moves it to
                    # UnknownOutcome when the lease ends (it may have been sent).
                    log.exception("unexpected error delivering", extra=current.context())
                    return
        finally:
            self.slots.free_one()

    def _idle_with_provider_disabled(self) -> None:
        """Claim nothing until stopped: a claim would only be released again (and audited each time).
        The loop and the database check stay fresh, so /healthz says the process is well and idle."""
        log.warning("provider disabled: claiming nothing until restarted with the provider enabled")
        while not self.stopping.is_set():
            self.stats.last_loop = time.monotonic()
            try:
                self.database.call("server_version", lambda r: r.server_version())
            except OutboxError as exc:
                log.warning("database unavailable while idle", extra={"error": str(exc)})
                self.database.drop()
            self.stopping.wait(self.config.poll_interval)

    def _drain(self, executor: ThreadPoolExecutor) -> None:
        # Also when the claim loop ended by an error, not a signal: slots must stop taking rows.
        self.stopping.set()
        grace_end = time.monotonic() + self.config.shutdown_grace_seconds
        if not self.slots.wait_all_free(grace_end):
            log.error(
                "shutdown grace ran out with sends in flight; their rows go UnknownOutcome when the lease ends",
                extra={"in_flight": self.slots.taken},
            )
        executor.shutdown(wait=self.slots.taken == 0, cancel_futures=True)
        self._reserver.shutdown(wait=True)
        self.reservations.release_all("shutting down")
        if self.slots.taken == 0:  # else a send still running may lead a finalize on it: exit closes it
            self._finalizes.drop()
        self.database.drop()


def _answers(account: AccountReader) -> Callable[[], bool]:
    """The breaker's health check: SES answered GetAccount (a call that sends nothing)."""

    def check() -> bool:
        try:
            account.read()
        except AccountUnreadable:
            return False
        return True

    return check


# How long a worker's statement waits for a row lock another session holds (the server's default is
# 50 s): a service that keeps a row locked in its open transaction holds up that call for this long at
# most, and the call then fails as a retryable 1205 instead of stopping the replica's finalizes for
# minutes (issue 37).
ROW_LOCK_WAIT_SECONDS = 3


def _worker_repository(config: WorkerConfig) -> OutboxRepository:
    repo = OutboxRepository.open(
        config.dsn, connect_timeout=min(5.0, config.db_read_timeout), read_timeout=config.db_read_timeout
    )
    repo.limit_row_lock_wait(ROW_LOCK_WAIT_SECONDS)
    return repo


class _LazyAccount:
    """GetAccount through a client made on first use (a Worker built for a test never makes one)."""

    def __init__(self, config: WorkerConfig) -> None:
        self._config = config
        self._reader: SesAccount | None = None

    def read(self) -> AccountQuota:
        if self._reader is None:
            self._reader = SesAccount.for_config(self._config)
        return self._reader.read()
