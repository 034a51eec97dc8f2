"""The claim loop: claim as many rows as there are free send slots and rate tokens, hand each to a
send slot, and back off when there is nothing to claim or the database does not answer."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Executor

from email_outbox import failpoints
from email_outbox.errors import DatabaseUnavailable, SchemaNotInstalled, TransientDatabaseError
from email_outbox.worker.breaker import Breaker
from email_outbox.worker.claim import Claim
from email_outbox.worker.config import WorkerConfig
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.pacing import Pacer
from email_outbox.worker.reservations import Reservations
from email_outbox.worker.slots import Slots
from email_outbox.worker.stats import WorkerStats

log = logging.getLogger("email_outbox.worker")

MIN_IDLE_SECONDS = 0.02
# With fast sends, the loop waits up to this long for every slot to be free before it claims: slots
# free every millisecond or two then, a claim has a fixed cost beside its cost per row, and the sends
# of one claim end close together, so their finalizes land as one group too (docs/performance.md,
# "The worker's timing constants"). Never with slow sends, where a slot waiting is a send not made, and
# only with a backlog: a trickle of new rows is claimed as it comes.
GATHER_SECONDS = 0.020
# A claim that meets these backs off and tries again later: the process stays up.
CLAIM_BACKS_OFF_ON = (DatabaseUnavailable, TransientDatabaseError, SchemaNotInstalled)


class ClaimLoop:
    def __init__(
        self,
        config: WorkerConfig,
        database: DatabaseCalls,
        slots: Slots,
        pacer: Pacer,
        stats: WorkerStats,
        stopping: threading.Event,
        reservations: Reservations,
        breaker: Breaker,
    ) -> None:
        self._reservations = reservations
        self._breaker = breaker
        self._config = config
        self._database = database
        self._slots = slots
        self._pacer = pacer
        self._stats = stats
        self._stopping = stopping

    def run(self, executor: Executor, deliver: Callable[[Claim], None], tick: Callable[[], None]) -> None:
        """Until stopped; `tick` runs once per turn (the progress line)."""
        config, stopping = self._config, self._stopping
        idle = MIN_IDLE_SECONDS
        backlogged = False  # the last claim took all it asked for: more rows are probably due
        while not stopping.is_set():
            self._stats.last_loop = time.monotonic()
            tick()
            paused = self._pacer.pause_remaining()
            if paused > 0:
                stopping.wait(min(paused, config.poll_interval))
                continue
            free = self._slots.wait_for_free(config.poll_interval, stopping)
            if free == 0:
                continue
            every = self._slots.concurrency
            if backlogged and free < every and not self._provider_is_slow():
                free = self._slots.wait_for_more(every, GATHER_SECONDS)
            # The provider breaker: nothing while SES is down, one row for this replica's probe.
            free = self._breaker.claim_limit(free)
            if free == 0:
                stopping.wait(self._breaker.wait_seconds(config.poll_interval))
                continue
            limit = self._pacer.tokens(min(free, config.batch_size), stopping)
            if limit == 0:
                continue
            claims = self.claim(limit)
            self._pacer.give_back(limit - len(claims or []))
            backlogged = claims is not None and len(claims) == limit
            if claims is None:  # the database is down: stop claiming, keep the process
                stopping.wait(min(idle * 4, config.poll_interval))
                idle = min(max(idle * 2, 0.25), config.poll_interval)
                continue
            for claim in claims:
                executor.submit(deliver, claim)
            if claims:
                idle = MIN_IDLE_SECONDS
                if len(claims) == limit:
                    continue
            stopping.wait(idle)
            idle = min(idle * 2, config.poll_interval)

    def next_for_held_slot(self) -> Claim | None:
        """A send slot that has just sent a row takes its next one at once, as a bare send loop would:
        a reservation, started in the same call as the finalize of the row it sent, with no hand-off
        to this loop's thread and back, while the next batch is reserved off the send path. It does so
        while sends are slow, and while fast ones have a backlog to work (the last claim or reserve
        came back full): then the replica's slots end their rows and start their next ones in one
        call and one set (email_finalize_batch), and claims no longer wait on the send path. With fast
        sends and no backlog the slot goes back, and the loop's next claim serves the slots that are
        free, as new rows come. None when the slot should go idle (that, stopping, paused, the
        provider breaker not closed, no reservation held and no rate token at hand to reserve with,
        nothing due, or the database did not answer). A held reservation was paid for with its rate
        token when reserved."""
        if self._stopping.is_set() or self._pacer.pause_remaining() > 0 or not self._breaker.closed():
            if len(self._reservations):
                self._reservations.release_all(
                    "not carrying on: stopping, or paused, or the provider is down"
                )
            return None
        if not (self._provider_is_slow() or self._stats.backlogged or len(self._reservations)):
            return None
        return self._reservations.take()

    def _provider_is_slow(self) -> bool:
        return self._stats.sends_are_slow()

    def claim(self, limit: int) -> list[Claim] | None:
        """Up to `limit` rows, started, each taking a send slot here: none of them waits; None if the
        database could not be asked."""
        config = self._config
        token = uuid.uuid4().hex
        # The lease started no earlier than this call: a conservative deadline on our own clock.
        deadline = time.monotonic() + config.lease_seconds
        try:
            emails = self._database.call(
                "email_claim_batch_bounded",
                lambda r: r.claim_batch_bounded(
                    token, config.worker_id, config.lease_seconds, limit, config.inline_body_bytes
                ),
            )
        except CLAIM_BACKS_OFF_ON as exc:
            log.error("claim failed; not claiming until the database answers", extra={"error": str(exc)})
            return None
        self._slots.take(len(emails))
        self._stats.record_claim(len(emails), limit)
        if emails:
            failpoints.hit("after_claim")
        claims = [Claim(email, token, deadline) for email in emails]
        if log.isEnabledFor(logging.DEBUG):
            for claim in claims:
                log.debug(
                    "claimed", extra={**claim.context(), "attempt": claim.attempt, "claim_token": token}
                )
        return claims
