"""Rows claimed ahead while sends are slow: reservations, each held by this replica but not started.

A send slot that has just sent a row takes its next one from here instead of claiming it, and the
start mark of that row rides in the same call as the finalize of the row it sent (Finalizer.
apply_and_start). When none is left, the slot reserves a batch for itself and the slots after it:
one claim for several rows instead of one per row; when only a few are left, the next batch is reserved
off the send path, on a thread of its own, so a slot seldom waits for a claim. A reservation is never
sent without a start mark, and one that expires unstarted goes back to where it was claimed from
(email_reserve_batch), so a crash leaves no more rows ambiguous than the slots that were sending.

A reservation is held only with its send-rate token: a batch is as large as the tokens at hand, so a
held reservation never waits for the rate limiter (it did: reserved without tokens, then left unstarted
for half a lease when a slot found none at hand), and the tokens of one given back go back too.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from concurrent.futures import Executor
from typing import Protocol

from email_outbox import failpoints
from email_outbox.errors import DatabaseUnavailable, SchemaNotInstalled, TransientDatabaseError
from email_outbox.models import ClaimedEmail
from email_outbox.worker.claim import Claim
from email_outbox.worker.config import WorkerConfig
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.finalizer import Finalizer
from email_outbox.worker.stats import WorkerStats

log = logging.getLogger("email_outbox.worker")

# A reservation with less than this share of its lease left is given back rather than started: its
# send and finalize must fit in what is left.
FRESH_SHARE = 0.5
# The next batch is reserved in the background once no more than this share of a batch is left, so a
# slot seldom finds none left and waits for a claim before its send.
REFILL_AT_SHARE = 0.25
# Through a backlog (the last claim or reserve came back full) one reserve takes the rows the replica
# sends in about RESERVE_AHEAD_SECONDS, from one to MAX_BATCHES_AHEAD batches of `concurrency`: a
# claim has a fixed cost whatever its size, so larger claims cost less per email (docs/performance.md,
# "The worker's timing constants"), while a row held ahead delays a higher-priority row enqueued
# meanwhile by no more than that time. Slow sends (a second each) keep
# batches of `concurrency`, which the replica sends in one round anyway.
RESERVE_AHEAD_SECONDS = 0.25
MAX_BATCHES_AHEAD = 4


class RateTokens(Protocol):
    """What reservations need of the pacer (email_outbox.worker.pacing.Pacer)."""

    def tokens_at_hand(self, wanted: int) -> int: ...

    def give_back(self, unused: int) -> None: ...


class Reservations:
    def __init__(
        self,
        config: WorkerConfig,
        database: DatabaseCalls,
        finalizer: Finalizer,
        stats: WorkerStats,
        refill: Executor,
        tokens: RateTokens,
    ) -> None:
        """`refill` runs the background reserves (one at a time); `tokens` pays for each reservation."""
        self._tokens = tokens
        self._config = config
        self._database = database
        self._finalizer = finalizer
        self._stats = stats
        self._refill = refill
        self._refill_at = int(config.concurrency * REFILL_AT_SHARE)
        self._held: deque[Claim] = deque()
        self._changed = threading.Condition()
        self._refilling = False

    def __len__(self) -> int:
        return len(self._held)

    def take(self) -> Claim | None:
        """The next reservation to send, reserving a batch when none is left; None when nothing is
        due or the database did not answer."""
        stale: list[Claim] = []
        with self._changed:
            claim = self._fresh(stale)
            if claim is None and self._refilling:
                self._changed.wait_for(lambda: not self._refilling)
                claim = self._fresh(stale)
            elif claim is None:
                self._held.extend(self._reserve())
                claim = self._fresh(stale)
            # Only while the last reserve came back full: after a short one nothing more is due now,
            # and a background reserve would come back empty.
            refill = (
                claim is not None
                and len(self._held) <= self._refill_at
                and not self._refilling
                and self._stats.backlogged
            )
            self._refilling = self._refilling or refill
        if refill:
            try:
                self._refill.submit(self._reserve_in_background)
            except RuntimeError:  # shutting down: the executor takes no more work
                with self._changed:
                    self._refilling = False
                    self._changed.notify_all()
        if stale:
            self._give_back(stale, "reservation too old to start")
        return claim

    def release_all(self, reason: str, until: float | None = None) -> bool:
        """Give back every reservation held (stopping, paused, or sends are fast again), once a
        reserve on its way has landed. With `until` (a monotonic time, at a stop) it waits for that
        reserve no longer: False when it gave up waiting, leaving what that reserve takes to expire
        unstarted and go back to the queue."""
        timeout = None if until is None else max(0.0, until - time.monotonic())
        # A slot's own reserve holds the lock during its call, a background one sets _refilling.
        if not self._changed.acquire(timeout=-1 if timeout is None else timeout):
            return False
        try:
            if not self._changed.wait_for(lambda: not self._refilling, timeout=timeout):
                return False
            claims = list(self._held)
            self._held.clear()
        finally:
            self._changed.release()
        self._give_back(claims, reason)
        return True

    def held_ids(self) -> list[int]:
        return sorted(claim.id for claim in list(self._held))

    def _give_back(self, claims: list[Claim], reason: str) -> None:
        """Release reservations unsent, and their rate tokens."""
        if claims:
            self._tokens.give_back(len(claims))
        self._finalizer.release_all(claims, reason)

    def _reserve_in_background(self) -> None:
        claims: list[Claim] = []
        try:
            claims = self._reserve()
        finally:
            with self._changed:
                self._held.extend(claims)
                self._refilling = False
                self._changed.notify_all()

    def _fresh(self, stale: list[Claim]) -> Claim | None:
        now, keep = time.monotonic(), self._config.lease_seconds * FRESH_SHARE
        while self._held:
            claim = self._held.popleft()
            if claim.deadline - now >= keep:
                return claim
            stale.append(claim)
        return None

    def _batch_rows(self) -> int:
        """How many rows one reserve asks for (RESERVE_AHEAD_SECONDS)."""
        concurrency = self._config.concurrency
        median = self._stats.median_send_seconds()
        if not self._stats.backlogged or median is None:
            return concurrency
        rounds_ahead = int(RESERVE_AHEAD_SECONDS / max(median, 1e-6))
        return concurrency * max(1, min(MAX_BATCHES_AHEAD, rounds_ahead))

    def _reserve(self) -> list[Claim]:
        """As many rows as there are rate tokens at hand, up to _batch_rows; the tokens of rows not
        found come back."""
        config = self._config
        paid = self._tokens.tokens_at_hand(self._batch_rows())
        if paid == 0:
            return []
        token = uuid.uuid4().hex
        deadline = time.monotonic() + config.lease_seconds
        emails: list[ClaimedEmail] = []
        try:
            emails = self._database.call(
                "email_reserve_batch",
                lambda r: r.reserve_batch(
                    token, config.worker_id, config.lease_seconds, paid, config.inline_body_bytes
                ),
            )
        except (DatabaseUnavailable, TransientDatabaseError, SchemaNotInstalled) as exc:
            log.warning("reserving failed; the slot goes back to the claim loop", extra={"error": str(exc)})
            return []
        finally:
            self._tokens.give_back(paid - len(emails))
        self._stats.record_claim(len(emails), paid)
        if emails:
            failpoints.hit("after_claim")
        return [Claim(email, token, deadline) for email in emails]
