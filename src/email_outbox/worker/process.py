"""A worker replica: the parts put together, the run from start-up to drained shutdown, and signals.

No database transaction is open during a send: every procedure call commits on its own
(docs/design.md sections 3 and 8).
"""

from __future__ import annotations

import contextlib
import faulthandler
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

__all__ = ["EXIT_ROWS_LEFT", "REQUIRED_PROCEDURES", "Sender", "Worker"]

log = logging.getLogger("email_outbox.worker")

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
# The exit code of a stop that left rows in flight (the grace or the stop bound ran out): they stay
# Processing and go UnknownOutcome when their lease ends, never sent again. 0: every row finalized.
EXIT_ROWS_LEFT = 3
# If the stop bound's own thread cannot run (a thread holding the interpreter's lock in a C call),
# faulthandler's thread, which needs no Python, dumps the stacks and exits with 1 this much later.
BACKSTOP_SECONDS = 5.0


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
        # Set once, when the stop begins: the end of the grace for the sends in flight, after which
        # no database call tries again.
        self._grace_end: float | None = None
        self._stop_lock = threading.Lock()
        self._finished = threading.Event()
        self._own_process = False  # install_signal_handlers: the stop bound may end the process
        self._in_slots: dict[int, Claim] = {}  # by thread: the row each send slot is working on
        rng = rng or random.Random()
        self.database = DatabaseCalls(
            repository_factory or (lambda: _worker_repository(config)),
            config.dsn,
            self.stats,
            rng,
            give_up=self._giving_up,
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

    # --- signals and the stop bound -------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        """SIGTERM or SIGINT: drain and exit within the stop bound; a second: exit at once. SIGUSR1:
        every thread's stack to stderr (an operator's aid for a worker that seems stuck).

        The stop signals are handled on a thread of their own (sigwait), never in the main thread:
        Python runs a handler only there, between two bytecodes, so a main thread stuck in a call
        would not see the signal, and a handler that took a lock the main thread held at that moment
        (an Event's, in its wait) would wait for itself for ever. Threads started from here on inherit
        the block; one started earlier that takes a stop signal hands it to that thread."""
        self._own_process = True
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        taker = threading.Thread(target=self._await_signals, name="signals", daemon=True)
        taker.start()
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda signum, _frame: signal.pthread_kill(taker.ident or 0, signum))

    def _await_signals(self) -> None:
        while True:
            self._on_signal(signal.sigwait(STOP_SIGNALS), None)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals >= 2:
            log.error("second signal: exiting at once; claimed rows go UnknownOutcome when their lease ends")
            os._exit(128 + signum)
        log.info(
            "signal received: no more claims, finishing in-flight sends",
            extra={"signal": signum, "stop_bound_s": self.config.stop_bound_seconds},
        )
        self.request_stop()

    def request_stop(self) -> None:
        self._start_stop_clock()
        self.stopping.set()
        self.slots.wake()

    def _giving_up(self) -> bool:
        """No database call tries again: a second signal, or the stop's grace is over."""
        if self._signals >= 2:
            return True
        grace_end = self._grace_end
        return grace_end is not None and time.monotonic() >= grace_end

    def _start_stop_clock(self) -> None:
        """The first time: the grace starts, and in a process of its own the stop bound's watch."""
        with self._stop_lock:
            if self._grace_end is not None:
                return
            now = time.monotonic()
            self._grace_end = now + self.config.shutdown_grace_seconds
        if self._own_process:
            bound = self.config.stop_bound_seconds
            threading.Thread(
                target=self._exit_at_bound, args=(now + bound,), name="stop-bound", daemon=True
            ).start()
            faulthandler.dump_traceback_later(bound + BACKSTOP_SECONDS, exit=True)

    def _exit_at_bound(self, at: float) -> None:
        """At the stop bound, exit whatever the threads are doing: a thread stuck in a network call
        is not waited for (the interpreter would join it at exit)."""
        if self._finished.wait(max(0.0, at - time.monotonic())):
            return
        log.error(
            "stop bound reached: exiting without waiting for the calls still running; rows in flight"
            " go UnknownOutcome when their lease ends, reservations back to the queue, none is sent again",
            extra={"stop_bound_s": self.config.stop_bound_seconds, **self.rows_left()},
        )
        faulthandler.dump_traceback(all_threads=True)
        _flush_logs()
        os._exit(EXIT_ROWS_LEFT)

    def rows_left(self) -> dict[str, list[int]]:
        """The rows this replica still holds: in its send slots, and reserved but not started."""
        return {
            "in_flight_ids": sorted(claim.id for claim in list(self._in_slots.values())),
            "reserved_ids": self.reservations.held_ids(),
        }

    def threads_left(self, settle: float = 0.5) -> list[str]:
        """Threads the interpreter would wait for at exit (a send or a reserve still in its call), after
        `settle` seconds for idle ones to end."""
        until = time.monotonic() + settle
        others = [t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon]
        for thread in others:
            thread.join(max(0.0, until - time.monotonic()))
        return [t.name for t in others if t.is_alive()]

    # --- the run ----------------------------------------------------------------------------------
    def run(self) -> int:
        """Until stopped; 0, or EXIT_ROWS_LEFT when the stop left rows in flight."""
        try:
            return self._run()
        finally:
            self._finished.set()  # the stop bound's watch stands down: the process is exiting

    def _run(self) -> int:
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
            left = self._drain(executor)
            if self.metrics_server is not None:
                self.metrics_server.stop()
        self.progress.write()
        log.info("worker stopped", extra={"stats": self.stats.snapshot()})
        return EXIT_ROWS_LEFT if left else 0

    def _deliver(self, claim: Claim) -> None:
        """Runs on a send slot: the claimed row, then the reservations this slot takes for itself while
        sends are slow, until there is none. The slot is held throughout and freed once, at the end."""
        next_claim: Claim | None = claim
        slot = threading.get_ident()
        try:
            while next_claim is not None:
                current, next_claim = next_claim, None
                self._in_slots[slot] = current
                try:
                    next_claim = self.delivery.deliver(current, self.loop.next_for_held_slot)
                except Exception:
                    # Never lose the row silently: it stays Processing and the sweep moves it to
                    # UnknownOutcome when the lease ends (it may have been sent).
                    log.exception("unexpected error delivering", extra=current.context())
                    return
        finally:
            self._in_slots.pop(slot, None)
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

    def _drain(self, executor: ThreadPoolExecutor) -> bool:
        """Stop within the stop bound: the sends in flight get the grace to finish and finalize, then
        every call gives up after its current try (`_giving_up`) and nothing waits for a thread still
        in one. True when rows were left in flight (they go UnknownOutcome when their lease ends)."""
        # Also when the claim loop ended by an error, not a signal: slots must stop taking rows.
        self.stopping.set()
        self._start_stop_clock()
        assert self._grace_end is not None
        left = not self.slots.wait_all_free(self._grace_end)
        if left:
            log.error(
                "shutdown grace ran out with sends in flight; their rows go UnknownOutcome when the lease"
                " ends, none is sent again",
                extra={"in_flight": self.slots.taken, **self.rows_left()},
            )
        executor.shutdown(wait=not left, cancel_futures=True)
        self._reserver.shutdown(wait=False)
        wrap_up_end = self._grace_end + self.config.db_read_timeout
        if not self.reservations.release_all("shutting down", until=wrap_up_end):
            log.error(
                "a reserve still on the wire at the stop: its rows go back to the queue when their lease"
                " ends, unsent",
                extra=self.rows_left(),
            )
        if self.slots.taken == 0:  # else a send still running may lead a finalize on it: exit closes it
            self._finalizes.drop()
        self.database.drop()
        return left or self.slots.taken > 0


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


def _flush_logs() -> None:
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):  # exiting anyway
            handler.flush()


class _LazyAccount:
    """GetAccount through a client made on first use (a Worker built for a test never makes one)."""

    def __init__(self, config: WorkerConfig) -> None:
        self._config = config
        self._reader: SesAccount | None = None

    def read(self) -> AccountQuota:
        if self._reader is None:
            self._reader = SesAccount.for_config(self._config)
        return self._reader.read()
