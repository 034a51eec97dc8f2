"""One claimed row, on a send slot: load its bodies if they did not come with the claim, send it,
look its outcome up in the action table, and hand the step to the finalizer."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Protocol

from email_outbox.models import ClaimedEmail
from email_outbox.ses.classify import Decision
from email_outbox.tracing.context import with_traceparent_tag
from email_outbox.tracing.spans import send_attempt_span
from email_outbox.worker.actions import DelayPolicy, Effect, action_for, release_unsent
from email_outbox.worker.breaker import Breaker
from email_outbox.worker.budget import ByteBudget
from email_outbox.worker.claim import Claim
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.finalizer import Finalizer
from email_outbox.worker.pacing import Pacer
from email_outbox.worker.stats import WorkerStats

log = logging.getLogger("email_outbox.worker")


class Sender(Protocol):
    """What the worker needs of a provider client (email_outbox.ses.sender.SesSender in production)."""

    def send(self, email: ClaimedEmail) -> Decision: ...


class Delivery:
    def __init__(
        self,
        sender: Sender,
        database: DatabaseCalls,
        finalizer: Finalizer,
        pacer: Pacer,
        body_budget: ByteBudget,
        delays: DelayPolicy,
        stats: WorkerStats,
        stopping: threading.Event,
        rng: random.Random,
        longest_send_seconds: float,
        breaker: Breaker,
        worker_id: str = "worker",
    ) -> None:
        self._breaker = breaker
        self._worker_id = worker_id
        self._sender = sender
        self._database = database
        self._finalizer = finalizer
        self._pacer = pacer
        self._body_budget = body_budget
        self._delays = delays
        self._stats = stats
        self._stopping = stopping
        self._rng = rng
        self._longest_send_seconds = longest_send_seconds

    def deliver(self, claim: Claim, take_next: Callable[[], Claim | None] | None = None) -> Claim | None:
        """Send `claim` and finalize it. With `take_next`, the row this slot sends next is taken after
        the send and started in the finalize's call: it is returned, ready to send (None: no next)."""
        if self._stopping.is_set():
            self._finalizer.apply(claim, release_unsent("shutting down before the send"))
            return None
        paused = self._pacer.pause_remaining()
        if paused > 0:
            self._finalizer.apply(claim, release_unsent("replica paused", int(paused) + 1))
            return None
        email = claim.email
        if email.ready:
            return self._send(claim, take_next)
        # Large bodies and attachments wait in the database until their send, within a byte budget
        # shared by every send of this replica.
        size = (0 if email.bodies_loaded else email.body_bytes) + email.attachment_bytes
        with self._body_budget.hold(size, self._stopping) as held:
            if not held:
                self._finalizer.apply(claim, release_unsent("shutting down before the send"))
                return None
            loaded = self._load(claim)
            if loaded is None:
                log.warning("claim lost before the send: not sent", extra=claim.context())
                return None
            return self._send(loaded, take_next)

    def _load(self, claim: Claim) -> Claim | None:
        """The claim with its bodies and attachments in hand; None when the claim is no longer held."""
        if not claim.email.bodies_loaded:
            bodies = self._database.call(
                "email_claimed_bodies",
                lambda r: r.claimed_bodies(claim.id, claim.token),
                deadline=claim.deadline,
            )
            if bodies is None:
                return None
            claim = claim.with_bodies(*bodies)
        if claim.email.attachment_count and claim.email.attachments is None:
            attachments = self._database.call(
                "email_claimed_attachments",
                lambda r: r.claimed_attachments(claim.id, claim.token),
                deadline=claim.deadline,
            )
            if not attachments:
                return None
            claim = claim.with_attachments(attachments)
        return claim

    def _send(self, claim: Claim, take_next: Callable[[], Claim | None] | None) -> Claim | None:
        started = time.monotonic()
        # The row may have waited (for the body budget, for its start to land through a database
        # blip): a send that could outlive the lease would be swept to UnknownOutcome in flight.
        if claim.deadline - started < self._longest_send_seconds:
            log.warning("lease too short to send: given back unsent", extra=claim.context())
            self._finalizer.apply(claim, release_unsent("lease too short to send"))
            return None
        if not self._breaker.may_send(claim):
            self._finalizer.apply(claim, self._breaker.held())
            return None
        email = claim.email
        with send_attempt_span(email.id, email.notification_id, claim.attempt, email.message_options) as span:
            decision = self._sender.send(with_traceparent_tag(email, span.traceparent()))
            span.finish(
                decision.outcome.value, decision.message_id, decision.error_code, decision.error_message
            )
        self._stats.record_send(
            decision.outcome.value, time.monotonic() - started, claim.email.created_at, claim.email.tenant
        )
        action = self._breaker.review(
            claim, decision, action_for(decision, claim.attempt, self._delays, self._rng)
        )
        if log.isEnabledFor(action.level):
            extra = {**claim.context(), "error_code": action.error_code, "error": action.error_message}
            if action.delay_seconds:
                extra["retry_in_s"] = action.delay_seconds
            log.log(action.level, action.message, extra=extra)
        self._pacer.apply(action.effect)
        if action.effect is Effect.PAUSE_TENANT:
            # Before the release: the row's tenant is paused first, so no claim takes it again meanwhile.
            self._pause_tenant(claim, decision)
        following = self._take_next(claim, take_next)
        _, started = self._finalizer.apply_and_start(claim, action, following)
        if following is not None and not started:
            self._pacer.give_back(1)
        return following if started else None

    def _pause_tenant(self, claim: Claim, decision: Decision) -> None:
        tenant = claim.email.ses_tenant_name or ""
        try:
            self._database.call(
                "email_tenant_sending_paused",
                lambda r: r.tenant_sending_paused(
                    tenant, "ses-sending-paused", self._worker_id, decision.error_code
                ),
                deadline=claim.deadline,
            )
        except Exception:  # the release below still happens; the next send of the tenant pauses it again
            log.exception("could not pause the tenant", extra=claim.context())

    @staticmethod
    def _take_next(sent: Claim, take_next: Callable[[], Claim | None] | None) -> Claim | None:
        """The row this slot sends next, or None. Failing to take one never costs the row just sent
        its finalize: that row may have been delivered."""
        if take_next is None:
            return None
        try:
            return take_next()
        except Exception:
            log.exception(
                "taking the next reservation failed: finalizing the row sent alone", extra=sent.context()
            )
            return None
