"""From a provider outcome to what the database is told: one table, and a pure function over it.

Nothing here touches the network, the database or a clock; `action_for` is tested on its own.
"""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from email_outbox.ses.classify import Decision, Outcome
from email_outbox.worker.backoff import retry_delay_seconds
from email_outbox.worker.config import WorkerConfig


class Step(enum.Enum):
    """The procedure the finalizer calls. The value is the status it writes: the one vocabulary of the
    SQL (email_finalize_batch's outcomes), the logs and the metrics (docs/procedures.md, "Versions")."""

    SENT = "Sent"  # email_finalize_sent
    FAILED = "Failed"  # email_finalize_failure, permanent
    RETRY = "Retrying"  # email_finalize_failure, not permanent: Retrying, or Failed at max_attempts
    UNKNOWN = "UnknownOutcome"  # email_finalize_unknown: never resent automatically
    RELEASE = "Released"  # email_release_claim: not sent, claimable again after the delay
    START = "Started"  # email_start_send: a reservation is about to be sent (never from an outcome)


class Delay(enum.Enum):
    NONE = "none"
    BACKOFF = "backoff"  # exponential in the attempt number, full jitter
    THROTTLE = "throttle"  # the throttle delay plus up to as much again
    ACCOUNT_PAUSE = "account_pause"  # as long as the replica pauses


class Effect(enum.Enum):
    """What the outcome does to this replica's pace, beside the row."""

    NONE = "none"
    SPEED_UP = "speed_up"  # a success restores the send rate towards its maximum
    SLOW_DOWN = "slow_down"  # SES throttled: lower the send rate
    PAUSE_REPLICA = "pause_replica"  # account or configuration problem: stop sending for a while
    PAUSE_TENANT = "pause_tenant"  # SES paused the row's tenant: pause it in the database, others go on
    HOLD_CLAIMS = "hold_claims"  # nothing to send with: stop claiming for a poll interval


@dataclass(frozen=True)
class Rule:
    step: Step
    delay: Delay
    effect: Effect
    level: int  # of the line logged before the step; DEBUG for the normal case
    message: str


RULES: Mapping[Outcome, Rule] = MappingProxyType(
    {
        Outcome.ACCEPTED: Rule(Step.SENT, Delay.NONE, Effect.SPEED_UP, logging.DEBUG, "accepted by the provider"),
        Outcome.PERMANENT: Rule(Step.FAILED, Delay.NONE, Effect.NONE, logging.WARNING, "permanent failure"),
        Outcome.TRANSIENT: Rule(Step.RETRY, Delay.BACKOFF, Effect.NONE, logging.WARNING, "transient failure"),
        Outcome.AMBIGUOUS: Rule(
            Step.UNKNOWN, Delay.NONE, Effect.NONE, logging.ERROR,
            "ambiguous provider outcome: UnknownOutcome, never resent automatically",
        ),
        Outcome.THROTTLED: Rule(
            Step.RELEASE, Delay.THROTTLE, Effect.SLOW_DOWN, logging.WARNING,
            "throttled by SES: releasing and slowing down",
        ),
        Outcome.ACCOUNT_PROBLEM: Rule(
            Step.RELEASE, Delay.ACCOUNT_PAUSE, Effect.PAUSE_REPLICA, logging.CRITICAL,
            "SES account or configuration problem: pausing this replica",
        ),
        Outcome.TENANT_PAUSED: Rule(
            Step.RELEASE, Delay.NONE, Effect.PAUSE_TENANT, logging.ERROR,
            "SES paused this tenant's sending: pausing the tenant, released unsent, no attempt used",
        ),
        Outcome.DISABLED: Rule(Step.RELEASE, Delay.NONE, Effect.HOLD_CLAIMS, logging.INFO, "provider disabled"),
    }
)  # fmt: skip


@dataclass(frozen=True)
class DelayPolicy:
    retry_base_seconds: float
    retry_max_seconds: float
    throttle_delay_seconds: int
    account_pause_seconds: float

    @classmethod
    def from_config(cls, config: WorkerConfig) -> DelayPolicy:
        return cls(
            config.retry_base_seconds,
            config.retry_max_seconds,
            config.throttle_delay_seconds,
            config.account_pause_seconds,
        )

    def seconds(self, delay: Delay, attempt: int, rng: random.Random) -> int:
        if delay is Delay.BACKOFF:
            return retry_delay_seconds(attempt, self.retry_base_seconds, self.retry_max_seconds, rng)
        if delay is Delay.THROTTLE:
            base = self.throttle_delay_seconds
            return base + rng.randint(0, max(1, base))
        if delay is Delay.ACCOUNT_PAUSE:
            return int(self.account_pause_seconds)
        return 0


@dataclass(frozen=True)
class Action:
    step: Step
    effect: Effect
    delay_seconds: int
    level: int
    message: str
    # For a release, why (stored as the row's last error code); for a failure, the provider's words.
    reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    message_id: str | None = None


def action_for(decision: Decision, attempt: int, policy: DelayPolicy, rng: random.Random) -> Action:
    """What to do with a row whose send, its `attempt`th, ended in `decision`."""
    rule = RULES[decision.outcome]
    if rule.step is Step.SENT and not decision.message_id:
        raise ValueError("an accepted send carries the provider's message id")
    return Action(
        step=rule.step,
        effect=rule.effect,
        delay_seconds=policy.seconds(rule.delay, attempt, rng),
        level=rule.level,
        message=rule.message,
        reason=(decision.error_code or rule.message) if rule.step is Step.RELEASE else None,
        error_code=decision.error_code,
        error_message=decision.error_message,
        message_id=decision.message_id,
    )


START = Action(Step.START, Effect.NONE, 0, logging.DEBUG, "send starting")


def release_unsent(reason: str, delay_seconds: int = 0) -> Action:
    """Give a claimed row back without sending it (shutting down, or the replica is paused)."""
    return Action(Step.RELEASE, Effect.NONE, delay_seconds, logging.DEBUG, reason, reason=reason)
