"""The delivery loop: claim only as many rows as there are free send slots, send, finalize.

A slot is held from the claim until that row's finalize has committed, so a crash leaves at most
`concurrency` rows ambiguous, and no claimed row ever waits for a slot (docs/design.md section 5).
No database transaction is open during a send: every procedure call commits on its own.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING, Protocol, TypeVar

from email_outbox import failpoints
from email_outbox.backoff import retry_delay_seconds
from email_outbox.budget import ByteBudget
from email_outbox.classify import Decision, Outcome
from email_outbox.config import WorkerConfig
from email_outbox.errors import (
    ConfigError,
    DatabaseUnavailable,
    OutboxError,
    SchemaNotInstalled,
    TransientDatabaseError,
)
from email_outbox.grants import WORKER_PROCEDURES
from email_outbox.models import ClaimedEmail
from email_outbox.ratelimit import TokenBucket
from email_outbox.repository import OutboxRepository
from email_outbox.routines import check_drift
from email_outbox.stats import WorkerStats

if TYPE_CHECKING:
    from email_outbox.metrics import MetricsServer

log = logging.getLogger("email_outbox.worker")

T = TypeVar("T")

# The worker role's procedures (email_outbox.grants): all must be installed before a worker starts.
REQUIRED_PROCEDURES = frozenset(WORKER_PROCEDURES)
# Sized for a cluster, where a third of claims may meet a certification conflict under load.
TRANSIENT_RETRIES = 10
MIN_IDLE_SECONDS = 0.02
CLAIM_GATHER_SECONDS = 0.005


class Sender(Protocol):
    """What the worker needs of a provider client (email_outbox.ses.SesSender in production)."""

    def send(self, email: ClaimedEmail) -> Decision: ...


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        sender: Sender,
        *,
        repository_factory: Callable[[], OutboxRepository] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.sender = sender
        self._open_repository = repository_factory or (lambda: OutboxRepository.open(config.dsn))
        self.rng = rng or random.Random()
        self.stats = WorkerStats()
        self.stopping = threading.Event()
        self.bucket = TokenBucket(config.max_send_rate)
        self.body_budget = ByteBudget(config.body_memory_bytes)
        self._slots = threading.Condition()
        self._in_flight = 0
        self._pause_until = 0.0
        self._local = threading.local()
        self._signals = 0
        self.metrics_server: MetricsServer | None = None
        self._claim_threshold = max(1, min(config.batch_size, config.concurrency) // 2)

    # --- connections ----------------------------------------------------------------------------
    def _repo(self) -> OutboxRepository:
        repo: OutboxRepository | None = getattr(self._local, "repo", None)
        if repo is None:
            repo = self._open_repository()
            self._local.repo = repo
            # A DSN may list several hosts: count each connection that went to another than the first.
            endpoint = (
                str(getattr(repo.connection, "server_host", "")),
                int(getattr(repo.connection, "server_port", 0)),
            )
            if self.config.dsn.alternates and endpoint != (self.config.dsn.host, self.config.dsn.port):
                self.stats.add("db_errors", "connected_to_later_host")
        return repo

    def _drop_repo(self) -> None:
        repo: OutboxRepository | None = getattr(self._local, "repo", None)
        if repo is not None:
            repo.close()
        self._local.repo = None

    def _db(
        self,
        what: str,
        op: Callable[[OutboxRepository], T],
        *,
        deadline: float | None = None,
        losses: list[str] | None = None,
    ) -> T:
        """Run one procedure call, retrying what is safe to retry.

        Deadlocks and lock wait timeouts: a bounded number of times. A lost connection: reconnect
        and retry until `deadline` (a finalize whose send already happened), or raise at once when
        there is no deadline (the caller decides, e.g. the claim loop backs off).
        """
        transient = 0
        pause = 0.05
        while True:
            try:
                result = op(self._repo())
                self.stats.last_db_success = time.monotonic()
                return result
            except TransientDatabaseError as exc:
                # Counted by the server's error code: on a Galera cluster 1213 is a certification
                # conflict, normal under load, and its rate is worth watching apart from 1205 or 1047.
                self.stats.add("db_errors", str(exc.errno or "transient"))
                transient += 1
                if transient > TRANSIENT_RETRIES:
                    raise
                log.warning(
                    "retrying after a transient database error",
                    extra={"call": what, "error_code": exc.errno, "attempt": transient, "error": str(exc)},
                )
            except DatabaseUnavailable as exc:
                self.stats.add("db_errors", "unavailable")
                self._drop_repo()
                if losses is not None:
                    losses.append(str(exc))
                if deadline is None or time.monotonic() + pause > deadline or self._hard_stop():
                    raise
                log.warning("database unavailable, retrying", extra={"call": what, "error": str(exc)})
            time.sleep(pause * (0.5 + self.rng.random()))
            pause = min(pause * 2, 2.0)

    def _hard_stop(self) -> bool:
        return self._signals >= 2

    # --- start-up ---------------------------------------------------------------------------------
    def check_schema(self) -> None:
        repo = self._repo()
        missing = REQUIRED_PROCEDURES - repo.installed_procedures()
        if missing:
            raise SchemaNotInstalled(
                f"procedures missing from {self.config.dsn.database}: {', '.join(sorted(missing))};"
                " run `email-outbox migrate` (migration 0001_schema plus procedures/) first"
            )
        if self.config.default_from and not repo.sender_allowed(self.config.default_from):
            raise ConfigError(
                f"the default sender {self.config.default_from} is not on the sender allow-list for every"
                f" account: email-outbox senders add {self.config.default_from} --by NAME --reason TEXT"
            )
        try:
            cursor = repo.connection.cursor()
            drift = check_drift(cursor, only=WORKER_PROCEDURES)
            cursor.close()
            if not drift.clean:
                log.warning(
                    "installed procedures differ from this release's procedures/",
                    extra={"drift": drift.describe()},
                )
        except Exception as exc:  # the check is advice; an account without metadata access still runs
            log.warning("could not compare installed procedures", extra={"error": str(exc)})

    def wait_for_database(self) -> None:
        pause = 0.5
        while not self.stopping.is_set():
            try:
                self._repo().server_version()
                return
            except DatabaseUnavailable as exc:
                self._drop_repo()
                log.error("database unavailable at start, waiting", extra={"error": str(exc)})
                self.stopping.wait(pause)
                pause = min(pause * 2, 10.0)

    # --- signals ----------------------------------------------------------------------------------
    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals >= 2:
            log.error("second signal: exiting at once; claimed rows go UnknownOutcome when their lease ends")
            import os

            os._exit(128 + signum)
        log.info("signal received: no more claims, finishing in-flight sends", extra={"signal": signum})
        self.request_stop()

    def request_stop(self) -> None:
        self.stopping.set()
        with self._slots:
            self._slots.notify_all()

    # --- the loop ---------------------------------------------------------------------------------
    def start_metrics(self) -> None:
        from email_outbox.metrics import start_metrics

        c = self.config
        assert c.metrics_port is not None
        self.metrics_server, _ = start_metrics(
            self.stats,
            c.worker_id,
            self._open_repository,
            self.stopping,
            host=c.metrics_host,
            port=c.metrics_port,
            stats_interval=c.stats_interval,
            stale_after=c.health_stale_seconds,
            provider_enabled=c.provider_enabled,
        )
        log.info(
            "metrics and health served",
            extra={"metrics_url": f"http://{c.metrics_host}:{self.metrics_server.port}/metrics"},
        )

    def run(self) -> int:
        if self.config.metrics_port is not None:
            self.start_metrics()
        self.wait_for_database()
        if self.stopping.is_set():
            return 0
        self.check_schema()
        log.info(
            "worker started",
            extra={
                "worker_id": self.config.worker_id,
                "concurrency": self.config.concurrency,
                "lease_seconds": self.config.lease_seconds,
            },
        )
        executor = ThreadPoolExecutor(max_workers=self.config.concurrency, thread_name_prefix="send")
        idle = MIN_IDLE_SECONDS
        try:
            if not self.config.provider_enabled:
                self._idle_with_provider_disabled()
            while not self.stopping.is_set():
                self.stats.last_loop = time.monotonic()
                pause = self._pause_until - time.monotonic()
                if pause > 0:
                    self.stopping.wait(min(pause, self.config.poll_interval))
                    continue
                with self._slots:
                    free = self.config.concurrency - self._in_flight
                    # Give a few more slots a moment to free up, so one claim CALL serves several rows
                    # instead of one; never longer, or freed slots would sit idle on a slow provider.
                    if 0 < free < self._claim_threshold:
                        self._slots.wait(timeout=CLAIM_GATHER_SECONDS)
                        free = self.config.concurrency - self._in_flight
                    if free <= 0:
                        self._slots.wait(timeout=self.config.poll_interval)
                        continue
                # Rate tokens are taken before the claim: a claimed row never waits for the limiter.
                limit = self.bucket.acquire_up_to(min(free, self.config.batch_size), self.stopping)
                if limit == 0:
                    continue
                rows = self._claim(limit)
                self.bucket.give_back(limit - len(rows or []))
                if rows is None:  # the database is down: stop claiming, keep the process
                    self.stopping.wait(min(idle * 4, self.config.poll_interval))
                    idle = min(max(idle * 2, 0.25), self.config.poll_interval)
                    continue
                for row in rows:
                    executor.submit(self._deliver, row[0], row[1], row[2])
                if len(rows) == limit:
                    idle = MIN_IDLE_SECONDS
                    continue
                if rows:
                    idle = MIN_IDLE_SECONDS
                self.stopping.wait(idle)
                idle = min(idle * 2, self.config.poll_interval)
        finally:
            self._drain(executor)
            if self.metrics_server is not None:
                self.metrics_server.stop()
        log.info("worker stopped", extra={"stats": self.stats.snapshot()})
        return 0

    def _idle_with_provider_disabled(self) -> None:
        """Claim nothing until stopped: a claim would only be released again (and audited each time).
        The loop and the database check stay fresh, so /healthz says the process is well and idle."""
        log.warning("provider disabled: claiming nothing until restarted with the provider enabled")
        while not self.stopping.is_set():
            self.stats.last_loop = time.monotonic()
            try:
                self._db("server_version", lambda r: r.server_version())
            except OutboxError as exc:
                log.warning("database unavailable while idle", extra={"error": str(exc)})
                self._drop_repo()
            self.stopping.wait(self.config.poll_interval)

    def _claim(self, limit: int) -> list[tuple[ClaimedEmail, str, float]] | None:
        token = uuid.uuid4().hex
        started = time.monotonic()
        # The lease started no earlier than this call: a conservative deadline on our own clock.
        deadline = started + self.config.lease_seconds
        try:
            claimed = self._db(
                "email_claim_batch",
                lambda r: r.claim_batch_v2(
                    token,
                    self.config.worker_id,
                    self.config.lease_seconds,
                    limit,
                    self.config.inline_body_bytes,
                ),
            )
        except (DatabaseUnavailable, TransientDatabaseError) as exc:
            log.error("claim failed; not claiming until the database answers", extra={"error": str(exc)})
            return None
        with self._slots:
            self._in_flight += len(claimed)
            self.stats.in_flight = self._in_flight
        self.stats.record_claim(len(claimed))
        if claimed:
            failpoints.hit("after_claim")
        for email in claimed:
            log.info(
                "claimed",
                extra={
                    "id": email.id,
                    "notification_id": email.notification_id,
                    "attempt": email.attempt_count + 1,
                    "claim_token": token,
                },
            )
        return [(email, token, deadline) for email in claimed]

    def _drain(self, executor: ThreadPoolExecutor) -> None:
        grace_end = time.monotonic() + self.config.shutdown_grace_seconds
        with self._slots:
            while self._in_flight > 0 and not self._hard_stop():
                remaining = grace_end - time.monotonic()
                if remaining <= 0:
                    log.error(
                        "shutdown grace ran out with sends in flight; their rows go UnknownOutcome"
                        " when the lease ends",
                        extra={"in_flight": self._in_flight},
                    )
                    break
                self._slots.wait(timeout=min(remaining, 0.5))
        executor.shutdown(wait=self._in_flight == 0, cancel_futures=True)
        self._drop_repo()

    # --- one row ----------------------------------------------------------------------------------
    def _deliver(self, email: ClaimedEmail, token: str, deadline: float) -> None:
        try:
            if self.stopping.is_set():
                self._release(email, token, deadline, 0, "shutting down before the send")
                return
            if time.monotonic() < self._pause_until:
                self._release(
                    email, token, deadline, int(self.config.account_pause_seconds), "replica paused"
                )
                return
            if email.bodies_loaded:
                self._send(email, token, deadline)
                return
            with self.body_budget.hold(email.body_bytes, self.stopping) as held:
                if not held:
                    self._release(email, token, deadline, 0, "shutting down before the send")
                    return
                bodies = self._db(
                    "email_claimed_bodies", lambda r: r.claimed_bodies(email.id, token), deadline=deadline
                )
                if bodies is None:
                    log.warning("claim lost before the send: not sent", extra={"id": email.id})
                    return
                text_body, html_body = bodies
                self._send(
                    replace(email, text_body=text_body, html_body=html_body, bodies_loaded=True),
                    token,
                    deadline,
                )
        except Exception:
            # Never lose the row silently: it stays Processing and the sweep moves it to
            # UnknownOutcome when the lease ends (it may have been sent).
            log.exception(
                "unexpected error delivering",
                extra={"id": email.id, "notification_id": email.notification_id},
            )
        finally:
            self._free_slot()

    def _send(self, email: ClaimedEmail, token: str, deadline: float) -> None:
        started = time.monotonic()
        decision = self.sender.send(email)
        elapsed = time.monotonic() - started
        self.stats.record_send(decision.outcome.value, elapsed)
        self._act(email, token, deadline, decision)

    def _free_slot(self) -> None:
        with self._slots:
            self._in_flight -= 1
            self.stats.in_flight = self._in_flight
            self._slots.notify_all()

    def _act(self, email: ClaimedEmail, token: str, deadline: float, d: Decision) -> None:
        ctx = {"id": email.id, "notification_id": email.notification_id}
        if d.outcome is Outcome.ACCEPTED:
            assert d.message_id is not None
            message_id = d.message_id
            self.bucket.speed_up()
            self._finalize(
                "sent",
                email,
                token,
                deadline,
                message_id,
                lambda r: r.finalize_sent(email.id, token, message_id),
            )
        elif d.outcome is Outcome.PERMANENT:
            log.warning(
                "permanent failure", extra={**ctx, "error_code": d.error_code, "error": d.error_message}
            )
            self._finalize_failure(email, token, deadline, d, permanent=True, delay=0)
        elif d.outcome is Outcome.TRANSIENT:
            delay = retry_delay_seconds(
                email.attempt_count + 1,
                self.config.retry_base_seconds,
                self.config.retry_max_seconds,
                self.rng,
            )
            log.warning("transient failure", extra={**ctx, "error_code": d.error_code, "retry_in_s": delay})
            self._finalize_failure(email, token, deadline, d, permanent=False, delay=delay)
        elif d.outcome is Outcome.AMBIGUOUS:
            log.error(
                "ambiguous provider outcome: UnknownOutcome, never resent automatically",
                extra={**ctx, "error_code": d.error_code, "error": d.error_message},
            )
            self._finalize(
                "unknown",
                email,
                token,
                deadline,
                None,
                lambda r: r.finalize_unknown(email.id, token, d.error_message),
            )
        elif d.outcome is Outcome.THROTTLED:
            with self.stats.lock:
                self.stats.throttle_events += 1
            self.bucket.slow_down(self._observed_rate())
            delay = self.config.throttle_delay_seconds + self.rng.randint(
                0, max(1, self.config.throttle_delay_seconds)
            )
            log.warning(
                "throttled by SES: releasing and slowing down",
                extra={**ctx, "error_code": d.error_code, "rate": self.bucket.rate, "retry_in_s": delay},
            )
            self._release(email, token, deadline, delay, "throttled")
        elif d.outcome is Outcome.ACCOUNT_PROBLEM:
            with self.stats.lock:
                self.stats.pause_events += 1
            self._pause_until = time.monotonic() + self.config.account_pause_seconds
            log.critical(
                "SES account or configuration problem: pausing this replica",
                extra={
                    **ctx,
                    "error_code": d.error_code,
                    "error": d.error_message,
                    "pause_s": self.config.account_pause_seconds,
                },
            )
            self._release(
                email, token, deadline, int(self.config.account_pause_seconds), d.error_code or "paused"
            )
        elif d.outcome is Outcome.DISABLED:
            # Nothing to send with: give the row back untouched and do not spin on claims.
            self._pause_until = max(self._pause_until, time.monotonic() + self.config.poll_interval)
            self._release(email, token, deadline, 0, "provider disabled")

    def _finalize_failure(
        self, email: ClaimedEmail, token: str, deadline: float, d: Decision, *, permanent: bool, delay: int
    ) -> None:
        self._finalize(
            "failed" if permanent else "retry",
            email,
            token,
            deadline,
            None,
            lambda r: (
                r.finalize_failure(
                    email.id,
                    token,
                    permanent=permanent,
                    error_code=d.error_code,
                    error_message=d.error_message,
                    retry_delay_seconds=delay,
                ).affected
            ),
        )

    def _observed_rate(self) -> float:
        with self.stats.lock:
            recent = list(self.stats.recent_send_seconds)
        return len(recent) / max(sum(recent), 1e-3) * self.config.concurrency if recent else 1.0

    def _finalize(
        self,
        kind: str,
        email: ClaimedEmail,
        token: str,
        deadline: float,
        message_id: str | None,
        op: Callable[[OutboxRepository], int],
    ) -> None:
        ctx = {
            "id": email.id,
            "notification_id": email.notification_id,
            "claim_token": token,
            "message_id": message_id,
        }
        losses: list[str] = []
        failpoints.hit("before_finalize")
        failpoints.hit_soon("during_finalize")
        try:
            affected = self._db(f"finalize_{kind}", op, deadline=deadline, losses=losses)
        except OutboxError as exc:
            self.stats.add("finalize", f"{kind}_never_landed")
            log.error(
                "finalize never landed; the row goes UnknownOutcome when its lease ends",
                extra={**ctx, "finalize": kind, "error": str(exc)},
            )
            return
        if affected == 1:
            self.stats.add("finalize", kind)
            log.info(kind, extra=ctx)
        elif losses:
            # The connection dropped during an earlier try, which may have committed: a refusal now
            # can be our own finalize already in place.
            self.stats.add("finalize", f"{kind}_refused_after_reconnect")
            log.warning(
                "finalize refused after a reconnect; the earlier try may have landed",
                extra={**ctx, "finalize": kind},
            )
        else:
            self.stats.add("finalize", "stale_claimant")
            log.error(
                "finalize refused: this worker no longer holds the claim (lease swept or taken over);"
                " not retried",
                extra={**ctx, "finalize": kind},
            )

    def _release(self, email: ClaimedEmail, token: str, deadline: float, delay: int, why: str) -> None:
        ctx = {"id": email.id, "notification_id": email.notification_id, "reason": why, "delay_s": delay}
        try:
            affected = self._db(
                "release", lambda r: r.release_claim(email.id, token, delay), deadline=deadline
            )
        except OutboxError as exc:
            self.stats.add("finalize", "release_never_landed")
            log.error(
                "release never landed; the row goes UnknownOutcome when its lease ends (it was not sent)",
                extra={**ctx, "error": str(exc)},
            )
            return
        self.stats.add("finalize", "released" if affected == 1 else "stale_claimant")
        if affected == 1:
            log.info("released", extra=ctx)
        else:
            log.error("release refused: claim no longer held", extra=ctx)
