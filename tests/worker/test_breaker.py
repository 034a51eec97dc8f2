"""The provider breaker's rule and its shared state, on the real procedures: what it does to each
outcome, when it opens, one probe among replicas, and that an ambiguous send stays UnknownOutcome."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import ConfigError
from email_outbox.models import ClaimedEmail
from email_outbox.ses.classify import Decision, Outcome
from email_outbox.worker.actions import DelayPolicy, Step, action_for
from email_outbox.worker.breaker import READ_EVERY_SECONDS, Breaker
from email_outbox.worker.claim import Claim
from email_outbox.worker.config import load_config
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.stats import WorkerStats
from tests.support.worker_harness import wait_until

POLICY = DelayPolicy(
    retry_base_seconds=5, retry_max_seconds=900, throttle_delay_seconds=5, account_pause_seconds=60
)
TRANSIENT = Decision(Outcome.TRANSIENT, error_code="ServiceUnavailable", error_message="503")
ACCEPTED = Decision(Outcome.ACCEPTED, message_id="m-1")
AMBIGUOUS = Decision(Outcome.AMBIGUOUS, error_code="ReadTimeout", error_message="read timeout")


class Clock:
    """The replica's monotonic clock, moved by hand so the once-a-second read is under the test's control."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float = READ_EVERY_SECONDS) -> None:
        self.now += seconds


def replica(
    dsn: DatabaseDsn,
    name: str,
    clock: Clock,
    provider_answers: Callable[[], bool] | None = None,
    **flags: str,
) -> Breaker:
    config = load_config({"dsn": dsn.url(), "worker_id": name, "breaker_probe_seconds": "1", **flags}, {})
    stats = WorkerStats()
    database = DatabaseCalls(lambda: OutboxRepository.open(dsn), dsn, stats, random.Random(0))
    return Breaker(config, database, stats, random.Random(0), clock, provider_answers)


def claim(row: int) -> Claim:
    email = ClaimedEmail(
        id=row, notification_id=f"n-{row}", to_address="a@example.com", from_address=None, subject="s",
        text_body="t", html_body=None, attempt_count=0, max_attempts=5, body_bytes=1, bodies_loaded=True,
    )  # fmt: skip
    return Claim(email, "tok", 1e12)


def step(breaker: Breaker, row: int, decision: Decision) -> Step:
    c = claim(row)
    return breaker.review(c, decision, action_for(decision, 1, POLICY, random.Random(0))).step


def test_one_email_failing_alone_never_opens_it(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    breaker = replica(dsn, "w1", Clock())
    assert [step(breaker, 7, TRANSIENT) for _ in range(10)] == [Step.RETRY] * 10
    assert repo.breaker_state("ses").state == "closed"


def test_an_accepted_send_between_failures_starts_the_count_again(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    breaker = replica(dsn, "w1", Clock())
    for row in (1, 2, 3, 4):
        assert step(breaker, row, TRANSIENT) is Step.RETRY
    assert step(breaker, 5, ACCEPTED) is Step.SENT
    for row in (6, 7, 8, 9):
        assert step(breaker, row, TRANSIENT) is Step.RETRY
    assert repo.breaker_state("ses").state == "closed"


def test_failures_outside_the_window_do_not_count(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    clock = Clock()
    breaker = replica(dsn, "w1", clock, breaker_window_seconds="10")
    for row in (1, 2, 3, 4, 5):
        assert step(breaker, row, TRANSIENT) is Step.RETRY
        clock.tick(3)
    assert repo.breaker_state("ses").state == "closed"


def test_broad_failures_open_it_for_every_replica_and_ambiguous_stays_unknown(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    clock = Clock()
    a, b = replica(dsn, "w1", clock), replica(dsn, "w2", clock)
    assert b.claim_limit(8) == 8
    steps = [step(a, row, TRANSIENT) for row in (1, 2, 3, 1, 2)]
    assert steps == [Step.RETRY] * 4 + [Step.RELEASE], "the fifth failure, among three emails, opens it"
    state = repo.breaker_state("ses")
    assert (
        state.state == "open" and state.changed_by == "w1" and state.last_error_code == "ServiceUnavailable"
    )
    # Open: a transient failure goes back without an attempt; an ambiguous one is UnknownOutcome as ever.
    assert step(a, 4, TRANSIENT) is Step.RELEASE
    assert step(a, 5, AMBIGUOUS) is Step.UNKNOWN
    assert step(b, 6, AMBIGUOUS) is Step.UNKNOWN
    assert a.claim_limit(8) == 0 and not a.may_send(claim(9))
    clock.tick()
    assert b.claim_limit(8) == 0, "the other replica reads the shared state before it claims"
    assert not b.may_send(claim(10))


def test_getaccount_answering_leaves_a_few_emails_their_own_failures_but_not_many(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    """While the health check answers, the run is the emails' own; the breadth (different emails failed
    with none accepted between) is not cleared by it, and at `breaker_broad_emails` opens the breaker."""
    checks: list[float] = []

    def answers() -> bool:
        checks.append(clock.now)
        return True

    clock = Clock()
    breaker = replica(
        dsn, "w1", clock, answers, breaker_failures="2", breaker_distinct_emails="2", breaker_broad_emails="8"
    )
    # Six emails failing on their own, twice each: the run is met, SES answers, they retry.
    assert [step(breaker, row, TRANSIENT) for row in (1, 2, 3, 4, 5, 6) * 2] == [Step.RETRY] * 12
    assert checks and repo.breaker_state("ses").state == "closed"
    # An accepted send starts the breadth again: seven more emails are seven, not thirteen.
    assert step(breaker, 50, ACCEPTED) is Step.SENT
    assert [step(breaker, row, TRANSIENT) for row in range(11, 17)] == [Step.RETRY] * 6
    clock.tick(31)  # GetAccount's last answer is stale: the run met again would ask it again
    assert step(breaker, 17, TRANSIENT) is Step.RETRY
    assert repo.breaker_state("ses").state == "closed"
    asked = len(checks)
    # The eighth different email meets the run and the breadth: it opens the breaker whatever GetAccount
    # would say (not asked), and is held without an attempt.
    assert step(breaker, 18, TRANSIENT) is Step.RELEASE
    assert len(checks) == asked, "the breadth does not ask GetAccount"
    state = repo.breaker_state("ses")
    assert state.state == "open" and state.last_error_code == "ServiceUnavailable"
    assert step(breaker, 19, TRANSIENT) is Step.RELEASE


def test_one_probe_among_replicas_and_its_answer_closes_it_for_all(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    clock = Clock()
    a, b = replica(dsn, "w1", clock), replica(dsn, "w2", clock)
    for row in (1, 2, 3, 4, 5):
        step(a, row, TRANSIENT)
    clock.tick()
    assert b.claim_limit(8) == 0

    def probe_taken() -> bool:
        clock.tick()
        return b.claim_limit(8) == 1

    wait_until(probe_taken, 10, "the probe to come due")
    assert a.claim_limit(8) == 0, "one replica probes at a time"
    assert b.may_send(claim(11)) and not b.may_send(claim(12)), "one send as the probe"
    assert repo.breaker_state("ses").probe_by == "w2"
    # The probe failed: open again, the probe goes back without an attempt.
    assert step(b, 11, TRANSIENT) is Step.RELEASE
    assert repo.breaker_state("ses").state == "open"
    wait_until(probe_taken, 10, "the next probe")
    assert b.may_send(claim(13))
    assert step(b, 13, ACCEPTED) is Step.SENT
    assert repo.breaker_state("ses").state == "closed"
    clock.tick()
    assert a.claim_limit(8) == 8 and b.claim_limit(8) == 8


def test_the_rule_settings_are_checked_and_zero_turns_the_breaker_off() -> None:
    off = load_config({"dsn": "mysql://u@h/db", "breaker_failures": "0"}, {})
    assert off.breaker_failures == 0 and off.breaker_distinct_emails == 3
    assert off.breaker_broad_emails == 20
    with pytest.raises(ConfigError, match="BREAKER_BROAD_EMAILS"):
        load_config(
            {"dsn": "mysql://u@h/db", "breaker_distinct_emails": "4", "breaker_broad_emails": "3"}, {}
        )
    with pytest.raises(ConfigError, match="BREAKER_BROAD_EMAILS"):
        load_config({"dsn": "mysql://u@h/db", "breaker_broad_emails": "10001"}, {})
    with pytest.raises(ConfigError, match="BREAKER_DISTINCT_EMAILS"):
        load_config({"dsn": "mysql://u@h/db", "breaker_failures": "2", "breaker_distinct_emails": "3"}, {})
    with pytest.raises(ConfigError, match="BREAKER_PROBE_SECONDS"):
        load_config({"dsn": "mysql://u@h/db", "breaker_probe_seconds": "0.5"}, {})
