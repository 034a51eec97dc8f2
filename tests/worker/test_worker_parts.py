"""The worker's parts, each on its own, with a fake repository and a fake sender: no database, no
network. The real-database tests (test_worker_delivery, test_soak, test_failover) prove the guarantees;
these pin down each part's rules."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import (
    AccessDenied,
    DatabaseUnavailable,
    InvalidInput,
    OutboxError,
    SchemaNotInstalled,
    TransientDatabaseError,
)
from email_outbox.models import BreakerState, ClaimedEmail, FailureResult, FinalizeItem, Status
from email_outbox.ses.classify import Decision, Outcome
from email_outbox.worker.actions import RULES, START, DelayPolicy, Effect, Step, action_for
from email_outbox.worker.breaker import Breaker
from email_outbox.worker.budget import ByteBudget
from email_outbox.worker.claim import Claim
from email_outbox.worker.config import WorkerConfig, load_config
from email_outbox.worker.database import DatabaseCalls, RetryPolicy
from email_outbox.worker.delivery import Delivery
from email_outbox.worker.finalizer import COMPANY_SECONDS, Finalizer
from email_outbox.worker.group_commit import GroupCommit
from email_outbox.worker.loop import ClaimLoop
from email_outbox.worker.pacing import Pacer
from email_outbox.worker.process import Worker
from email_outbox.worker.reservations import Reservations
from email_outbox.worker.slots import Slots
from email_outbox.worker.stats import WorkerStats

DSN = DatabaseDsn("u", "p", "127.0.0.1", 3306, "outbox")
NOW = datetime(2026, 1, 1)
NO_PAUSE = RetryPolicy(transient_attempts=3, first_pause=0.0, max_pause=0.0)
POLICY = DelayPolicy(
    retry_base_seconds=5, retry_max_seconds=900, throttle_delay_seconds=5, account_pause_seconds=60
)


def email(row: int = 1, *, attempt_count: int = 0, loaded: bool = True) -> ClaimedEmail:
    return ClaimedEmail(
        id=row, notification_id=f"n-{row}", to_address="a@example.com", from_address=None, subject="s",
        text_body="t" if loaded else None, html_body=None, attempt_count=attempt_count, max_attempts=5,
        body_bytes=1, bodies_loaded=loaded,
    )  # fmt: skip


@dataclass
class FakeRepository:
    """Answers like the procedures do; `errors` are raised, one per call, before answering."""

    errors: list[Exception] = field(default_factory=list)
    calls: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    affected: int = 1
    backlog: list[ClaimedEmail] = field(default_factory=list)

    def _answer(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))
        if self.errors:
            raise self.errors.pop(0)

    def breaker_state(self, provider: str) -> BreakerState:
        """Closed, and not counted in `calls`: these tests are about other parts (the breaker's own
        tests are in tests/worker/test_breaker.py)."""
        return BreakerState(provider, "closed", None, None, None, None, None, None, None, None, 0, False, NOW)

    def finalize_sent(self, row: int, token: str, message_id: str) -> int:
        self._answer("finalize_sent", row, token, message_id)
        return self.affected

    def finalize_unknown(self, row: int, token: str, message: str | None) -> int:
        self._answer("finalize_unknown", row, token, message)
        return self.affected

    def release_claim(self, row: int, token: str, delay: int) -> int:
        self._answer("release_claim", row, token, delay)
        return self.affected

    def finalize_failure(self, row: int, token: str, **kw: Any) -> FailureResult:
        self._answer("finalize_failure", row, token, kw["permanent"], kw["retry_delay_seconds"])
        return FailureResult(self.affected, Status.RETRYING)

    def finalize_batch(self, items: list[FinalizeItem]) -> list[FailureResult]:
        self._answer("finalize_batch", *items)
        stale = {item.id for item in items if item.claim_token != "tok"}
        return [FailureResult(0 if i.id in stale else self.affected, None) for i in items]

    def finalize_and_start(
        self, item: FinalizeItem, next_id: int, next_token: str
    ) -> tuple[FailureResult, bool]:
        self._answer("finalize_and_start", item, next_id, next_token)
        landed = self.affected if item.claim_token == "tok" else 0
        return FailureResult(landed, None), next_token == "tok" and self.affected == 1

    def claimed_bodies(self, row: int, token: str) -> tuple[str, str | None]:
        self._answer("claimed_bodies", row, token)
        return ("loaded text", None)

    def claim_batch_bounded(
        self, token: str, worker: str, lease: int, limit: int, inline: int
    ) -> list[ClaimedEmail]:
        self._answer("claim", limit)
        taken, self.backlog = self.backlog[:limit], self.backlog[limit:]
        return taken

    def reserve_batch(
        self, token: str, worker: str, lease: int, limit: int, inline: int
    ) -> list[ClaimedEmail]:
        self._answer("reserve", limit)
        taken, self.backlog = self.backlog[:limit], self.backlog[limit:]
        return taken

    def start_send(self, row: int, token: str) -> int:
        self._answer("start_send", row, token)
        return self.affected

    def close(self) -> None:
        pass


def calls_on(repo: FakeRepository, **kw: Any) -> DatabaseCalls:
    return DatabaseCalls(lambda: repo, DSN, WorkerStats(), random.Random(1), policy=NO_PAUSE, **kw)  # type: ignore[arg-type, return-value]


def claim(row: int = 1, *, deadline: float | None = None, **kw: Any) -> Claim:
    return Claim(email(row, **kw), "tok", time.monotonic() + 60 if deadline is None else deadline)


# --- the action table -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("outcome", "step", "effect"),
    [
        (Outcome.ACCEPTED, Step.SENT, Effect.SPEED_UP),
        (Outcome.PERMANENT, Step.FAILED, Effect.NONE),
        (Outcome.TRANSIENT, Step.RETRY, Effect.NONE),
        (Outcome.AMBIGUOUS, Step.UNKNOWN, Effect.NONE),
        (Outcome.THROTTLED, Step.RELEASE, Effect.SLOW_DOWN),
        (Outcome.ACCOUNT_PROBLEM, Step.RELEASE, Effect.PAUSE_REPLICA),
        (Outcome.DISABLED, Step.RELEASE, Effect.HOLD_CLAIMS),
    ],
)
def test_every_outcome_has_one_step_and_effect(outcome: Outcome, step: Step, effect: Effect) -> None:
    action = action_for(Decision(outcome, message_id="m-1", error_code="E"), 1, POLICY, random.Random(0))
    assert (action.step, action.effect) == (step, effect)


def test_the_table_covers_every_outcome_and_an_ambiguous_one_is_never_retried() -> None:
    assert set(RULES) == set(Outcome)
    assert RULES[Outcome.AMBIGUOUS].step is Step.UNKNOWN


def test_delays_come_from_the_policy() -> None:
    rng = random.Random(7)
    retry = [action_for(Decision(Outcome.TRANSIENT), 3, POLICY, rng).delay_seconds for _ in range(200)]
    assert min(retry) >= 0 and max(retry) <= 5 * 2**2 and len(set(retry)) > 5, "full jitter under the ceiling"
    throttled = [action_for(Decision(Outcome.THROTTLED), 1, POLICY, rng).delay_seconds for _ in range(200)]
    assert min(throttled) >= 5 and max(throttled) <= 10
    assert action_for(Decision(Outcome.ACCOUNT_PROBLEM), 1, POLICY, rng).delay_seconds == 60
    assert action_for(Decision(Outcome.PERMANENT), 1, POLICY, rng).delay_seconds == 0


def test_an_accepted_send_without_a_message_id_is_refused() -> None:
    with pytest.raises(ValueError, match="message id"):
        action_for(Decision(Outcome.ACCEPTED), 1, POLICY, random.Random(0))


# --- the retry policy -------------------------------------------------------------------------------
def test_transient_errors_are_retried_a_bounded_number_of_times() -> None:
    repo = FakeRepository(errors=[TransientDatabaseError("deadlock", 1213)] * 3)
    assert calls_on(repo).call("x", lambda r: r.finalize_sent(1, "t", "m")) == 1
    assert len(repo.calls) == 4
    repo = FakeRepository(errors=[TransientDatabaseError("deadlock", 1213)] * 4)
    with pytest.raises(TransientDatabaseError):
        calls_on(repo).call("x", lambda r: r.finalize_sent(1, "t", "m"))


def test_a_lost_connection_is_retried_until_the_deadline_and_reported() -> None:
    repo = FakeRepository(errors=[DatabaseUnavailable("gone")] * 2)
    losses: list[str] = []
    result = calls_on(repo).call(
        "x", lambda r: r.finalize_sent(1, "t", "m"), deadline=time.monotonic() + 5, losses=losses
    )
    assert result == 1 and losses == ["gone", "gone"]


@pytest.mark.parametrize("error", [DatabaseUnavailable("gone"), SchemaNotInstalled("1305 during a redeploy")])
def test_without_a_deadline_the_call_raises_at_once(error: Exception) -> None:
    repo = FakeRepository(errors=[error])
    with pytest.raises(type(error)):
        calls_on(repo).call("x", lambda r: r.finalize_sent(1, "t", "m"))
    assert len(repo.calls) == 1


def test_a_procedure_missing_during_a_redeploy_is_retried_within_the_lease() -> None:
    repo = FakeRepository(errors=[SchemaNotInstalled("1305")] * 2)
    assert (
        calls_on(repo).call("x", lambda r: r.finalize_sent(1, "t", "m"), deadline=time.monotonic() + 5) == 1
    )


def test_a_refusal_is_never_retried() -> None:
    repo = FakeRepository(errors=[InvalidInput("45000")])
    with pytest.raises(InvalidInput):
        calls_on(repo).call("x", lambda r: r.finalize_sent(1, "t", "m"), deadline=time.monotonic() + 5)
    assert len(repo.calls) == 1


def test_callers_taking_turns_share_one_connection_and_replace_it_when_it_is_lost() -> None:
    opened: list[FakeRepository] = []

    def open_repository() -> FakeRepository:
        opened.append(FakeRepository(errors=[] if opened else [DatabaseUnavailable("gone")]))
        return opened[-1]

    per_thread = DatabaseCalls(open_repository, DSN, WorkerStats(), random.Random(1), policy=NO_PAUSE)  # type: ignore[arg-type, return-value]
    turns = per_thread.taking_turns()
    used: list[OutboxRepository] = []

    def record(repo: OutboxRepository) -> int:
        used.append(repo)
        return repo.finalize_sent(1, "t", "m")

    for _ in range(3):  # three threads, one after another, as the group commit's leaders are
        leader = threading.Thread(target=lambda: turns.call("x", record, deadline=time.monotonic() + 5))
        leader.start()
        leader.join()
    assert used == [opened[0], opened[1], opened[1], opened[1]], "the lost one replaced, then shared"


@pytest.mark.parametrize(
    ("error", "replaced"), [(InvalidInput("45001 refused"), False), (OutboxError("out of sync"), True)]
)
def test_a_shared_connection_is_replaced_after_an_unexpected_error_but_not_a_refusal(
    error: OutboxError, replaced: bool
) -> None:
    opened: list[FakeRepository] = []

    def open_repository() -> FakeRepository:
        opened.append(FakeRepository(errors=[] if opened else [error]))
        return opened[-1]

    turns = DatabaseCalls(
        open_repository, DSN, WorkerStats(), random.Random(1), policy=NO_PAUSE
    ).taking_turns()  # type: ignore[arg-type, return-value]
    with pytest.raises(type(error)):
        turns.call("x", lambda r: r.finalize_sent(1, "t", "m"), deadline=time.monotonic() + 5)
    assert turns.call("x", lambda r: r.finalize_sent(1, "t", "m")) == 1
    assert len(opened) == (2 if replaced else 1)


# --- the finalizer ----------------------------------------------------------------------------------
def finalize(
    repo: FakeRepository, outcome: Outcome, *, deadline: float | None = None
) -> tuple[bool, WorkerStats]:
    database = calls_on(repo)
    stats = WorkerStats()
    action = action_for(
        Decision(outcome, message_id="m-1", error_code="E", error_message="e"), 1, POLICY, random.Random(0)
    )
    return Finalizer(database, stats).apply(claim(deadline=deadline), action), stats


@pytest.mark.parametrize(
    ("outcome", "procedure"),
    [
        (Outcome.ACCEPTED, "finalize_sent"),
        (Outcome.PERMANENT, "finalize_failure"),
        (Outcome.TRANSIENT, "finalize_failure"),
        (Outcome.AMBIGUOUS, "finalize_unknown"),
        (Outcome.THROTTLED, "release_claim"),
    ],
)
def test_each_step_calls_its_one_procedure_with_the_claim_token(outcome: Outcome, procedure: str) -> None:
    repo = FakeRepository()
    landed, stats = finalize(repo, outcome)
    assert landed and [name for name, _ in repo.calls] == [procedure]
    assert repo.calls[0][1][:2] == (1, "tok")
    assert sum(stats.finalize.values()) == 1


def test_a_refused_finalize_is_a_stale_claimant_and_not_retried() -> None:
    repo = FakeRepository(affected=0)
    landed, stats = finalize(repo, Outcome.ACCEPTED)
    assert not landed and stats.finalize == {"stale_claimant": 1} and len(repo.calls) == 1


def test_a_refusal_after_a_reconnect_may_be_our_own_earlier_try() -> None:
    repo = FakeRepository(affected=0, errors=[DatabaseUnavailable("dropped mid-commit")])
    landed, stats = finalize(repo, Outcome.ACCEPTED)
    assert not landed and stats.finalize == {"Sent_refused_after_reconnect": 1}


def test_a_finalize_that_cannot_land_before_the_lease_ends_gives_up_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    repo = FakeRepository(errors=[DatabaseUnavailable("gone")] * 100)
    landed, stats = finalize(repo, Outcome.ACCEPTED, deadline=time.monotonic() - 1)
    assert not landed and stats.finalize == {"Sent_never_landed": 1}
    assert "goes UnknownOutcome when its lease ends" in caplog.text


# --- group commit -----------------------------------------------------------------------------------
def test_finalizes_that_arrive_while_one_is_on_the_wire_land_together_each_with_its_own_result() -> None:
    first_on_the_wire, release = threading.Event(), threading.Event()
    groups: list[list[int]] = []

    def land(items: Any) -> list[int]:
        groups.append(list(items))
        if len(groups) == 1:
            first_on_the_wire.set()
            assert release.wait(5)
        return [item * 10 for item in items]

    group: GroupCommit[int, int] = GroupCommit(land)
    results: dict[int, int] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, group.submit(i))) for i in range(6)]
    threads[0].start()
    assert first_on_the_wire.wait(5)
    for thread in threads[1:]:
        thread.start()
    deadline = time.monotonic() + 5
    while len(group._waiting) < 5 and time.monotonic() < deadline:
        time.sleep(0.001)
    release.set()
    for thread in threads:
        thread.join(5)
    assert groups == [[0], [1, 2, 3, 4, 5]], "nothing waited for company; the rest went in one call"
    assert results == {i: i * 10 for i in range(6)}


def test_a_leader_waits_for_the_company_it_expects_and_no_longer_than_it_may() -> None:
    """While sends are fast, the first finalize waits for the other rows in the slots: one call."""
    groups: list[list[int]] = []

    def land(items: Any) -> list[int]:
        groups.append(list(items))
        return list(items)

    group: GroupCommit[int, int] = GroupCommit(land, company=lambda: (4, 5.0))
    threads = [threading.Thread(target=group.submit, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
        time.sleep(0.01)  # they arrive one after another, as sends end
    for thread in threads:
        thread.join(5)
    assert groups == [[0, 1, 2, 3]]
    lonely: GroupCommit[int, int] = GroupCommit(land, company=lambda: (4, 0.05))
    started = time.monotonic()
    assert lonely.submit(9) == 9
    assert 0.05 <= time.monotonic() - started < 2, "waited its time, no longer, for company that never came"


def test_the_finalizer_waits_for_company_only_while_sends_are_fast() -> None:
    stats = WorkerStats()
    finalizer = Finalizer(cast(Any, None), stats, lambda: 6)
    assert finalizer._company() == (6, COMPANY_SECONDS), "no judgement yet: fast"
    for _ in range(20):
        stats.record_send("accepted", 0.05)
    assert finalizer._company() == (0, 0.0), "slow sends: a slot waiting is a send not made"


def test_a_group_that_fails_tells_each_of_its_members_and_no_one_else() -> None:
    def land(items: Any) -> list[int]:
        if 13 in items:
            raise DatabaseUnavailable("gone")
        return list(items)

    group: GroupCommit[int, int] = GroupCommit(land)
    with pytest.raises(DatabaseUnavailable):
        group.submit(13)
    assert group.submit(7) == 7


def test_groups_are_capped() -> None:
    sizes: list[int] = []
    group: GroupCommit[int, int] = GroupCommit(
        lambda items: sizes.append(len(items)) or list(items), max_group=2
    )
    group._waiting.extend(group_ticket(i) for i in range(4))
    assert group.submit(9) == 9
    assert sizes == [2, 2, 1], "the oldest first, never more than the cap in one call"


def group_ticket(item: int) -> Any:
    from email_outbox.worker.group_commit import _Ticket

    return _Ticket(item)


def test_the_finalizer_sends_a_group_as_one_batch_each_row_fenced_on_its_own() -> None:
    repo, stats = FakeRepository(), WorkerStats()
    finalizer = Finalizer(calls_on(repo), stats)
    sent = action_for(Decision(Outcome.ACCEPTED, message_id="m-1"), 1, POLICY, random.Random(0))
    retry = action_for(
        Decision(Outcome.TRANSIENT, error_code="E", error_message="e"), 1, POLICY, random.Random(0)
    )
    reports = finalizer._land_reports(
        [
            ((claim(1), sent),),
            ((Claim(email(2), "stolen", time.monotonic() + 60), sent),),
            ((claim(3), retry),),
        ]
    )
    landings = [landing for (landing,) in reports]
    assert [name for name, _ in repo.calls] == ["finalize_batch"]
    items = repo.calls[0][1]
    assert [(i.id, i.outcome) for i in items] == [(1, "Sent"), (2, "Sent"), (3, "Retrying")]
    assert (
        items[0].provider_message_id == "m-1" and items[2].error_code == "E" and items[2].delay_seconds >= 0
    )
    assert [landing.affected for landing in landings] == [1, 0, 1]
    assert stats.finalize_group_sizes.count == 1 and stats.finalize_group_sizes.total == 3


@dataclass
class ShortAnsweringRepository(FakeRepository):
    """email_finalize_batch breaking its contract: one row fewer (or more) than items."""

    extra_rows: int = -1

    def finalize_batch(self, items: list[FinalizeItem]) -> list[FailureResult]:
        rows = super().finalize_batch(items)
        if self.extra_rows < 0:
            return rows[: self.extra_rows]
        return rows + [FailureResult(1, None)] * self.extra_rows


@pytest.mark.parametrize("extra_rows", [-1, 1])
def test_a_batch_answering_a_different_number_of_rows_than_items_confirms_no_landing(
    extra_rows: int, caplog: pytest.LogCaptureFixture
) -> None:
    """No StopIteration and no guessing which row is whose: every part, a start above all, is
    reported as not landed (a start is then not sent; a finalize is not retried), with an error line
    naming the counts."""
    repo = ShortAnsweringRepository(extra_rows=extra_rows)
    finalizer = Finalizer(calls_on(repo), WorkerStats())
    sent = action_for(Decision(Outcome.ACCEPTED, message_id="m-1"), 1, POLICY, random.Random(0))
    with caplog.at_level(logging.ERROR, logger="email_outbox.worker"):
        reports = finalizer._land_reports([((claim(1), sent), (claim(2), START)), ((claim(3), sent),)])
    assert [name for name, _ in repo.calls] == ["finalize_batch"], "not resent"
    assert [len(report) for report in reports] == [2, 1]
    landings = [landing for report in reports for landing in report]
    assert all(landing.error is not None for landing in landings)
    assert f"answered {3 + extra_rows} rows for 3 items" in str(landings[1].error)
    assert f"a finalize call answered {3 + extra_rows} rows for 3 items" in caplog.text


@pytest.mark.parametrize(
    ("second", "calls"),
    [("sent", ["finalize_batch", "finalize_sent", "finalize_sent"]),
     ("start", ["finalize_and_start", "finalize_sent", "start_send"])],
)  # fmt: skip
def test_a_group_the_database_refuses_lands_each_finalize_alone(second: str, calls: list[str]) -> None:
    """One malformed item cannot sink the others (not expected from items the worker builds)."""
    repo = FakeRepository(errors=[InvalidInput("45000: outcomes[1]")])
    finalizer = Finalizer(calls_on(repo), WorkerStats())
    sent = action_for(Decision(Outcome.ACCEPTED, message_id="m-1"), 1, POLICY, random.Random(0))
    landings = finalizer._land([(claim(1), sent), (claim(2), sent if second == "sent" else START)])
    assert [name for name, _ in repo.calls] == calls
    assert [landing.affected for landing in landings] == [1, 1]


# --- delivery ---------------------------------------------------------------------------------------
@dataclass
class FakeSender:
    decision: Decision = field(default_factory=lambda: Decision(Outcome.ACCEPTED, message_id="m-1"))
    sent: list[ClaimedEmail] = field(default_factory=list)

    def send(self, email: ClaimedEmail) -> Decision:
        self.sent.append(email)
        return self.decision


def delivery(
    repo: FakeRepository, sender: FakeSender, stopping: threading.Event | None = None
) -> tuple[Delivery, Pacer]:
    config = load_config({"dsn": "mysql://u@h/db"}, {})
    stats = WorkerStats()
    database = calls_on(repo)
    pacer = Pacer(config, stats)
    parts = Delivery(
        sender, database, Finalizer(database, stats), pacer, ByteBudget(1 << 20), POLICY, stats,
        stopping or threading.Event(), random.Random(0), config.longest_send_seconds,
        Breaker(config, database, stats, random.Random(0)),
    )  # fmt: skip
    return parts, pacer


def test_a_claim_is_sent_once_and_finalized() -> None:
    repo, sender = FakeRepository(), FakeSender()
    parts, _ = delivery(repo, sender)
    parts.deliver(claim())
    assert len(sender.sent) == 1 and [c[0] for c in repo.calls] == ["finalize_sent"]


def test_large_bodies_are_loaded_under_the_claim_token_before_the_send() -> None:
    repo, sender = FakeRepository(), FakeSender()
    parts, _ = delivery(repo, sender)
    parts.deliver(claim(loaded=False))
    assert [c[0] for c in repo.calls] == ["claimed_bodies", "finalize_sent"]
    assert sender.sent[0].text_body == "loaded text"


def test_nothing_is_sent_while_stopping_or_paused() -> None:
    stopping = threading.Event()
    stopping.set()
    repo, sender = FakeRepository(), FakeSender()
    parts, _ = delivery(repo, sender, stopping)
    parts.deliver(claim())
    repo2, sender2 = (
        FakeRepository(),
        FakeSender(Decision(Outcome.ACCOUNT_PROBLEM, error_code="SendingPausedException")),
    )
    parts2, pacer = delivery(repo2, sender2)
    parts2.deliver(claim(1))
    parts2.deliver(claim(2))
    assert sender.sent == [] and [c[0] for c in repo.calls] == ["release_claim"]
    assert [e.id for e in sender2.sent] == [1], "the second claim was released, not sent, while paused"
    assert [c[0] for c in repo2.calls] == ["release_claim", "release_claim"] and pacer.pause_remaining() > 50


def test_a_row_whose_lease_is_too_short_for_a_send_is_given_back_unsent() -> None:
    repo, sender = FakeRepository(), FakeSender()
    parts, _ = delivery(repo, sender)
    # It waited (for the body budget, for its start through a database blip) until less than the
    # longest send (connect + read timeout) is left: sending now could outlive the lease.
    parts.deliver(claim(deadline=time.monotonic() + 1))
    assert sender.sent == [] and [c[0] for c in repo.calls] == ["release_claim"]


def test_failing_to_take_the_next_row_never_costs_the_sent_row_its_finalize(
    caplog: pytest.LogCaptureFixture,
) -> None:
    repo, sender = FakeRepository(), FakeSender()
    parts, _ = delivery(repo, sender)

    def take_next() -> Claim | None:
        raise AccessDenied("reserve refused")

    with caplog.at_level(logging.ERROR, logger="email_outbox.worker"):
        assert parts.deliver(claim(), take_next) is None
    assert len(sender.sent) == 1 and [c[0] for c in repo.calls] == ["finalize_sent"]
    assert "taking the next reservation failed" in caplog.text


# --- the claim loop ---------------------------------------------------------------------------------
class InlineExecutor(Executor):
    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def run_loop(config: WorkerConfig, repo: FakeRepository, slots: Slots, until: int) -> list[Claim]:
    """A claim loop on `repo`, each row delivered at once and its slot freed, until `until` rows."""
    stats, stopping = WorkerStats(), threading.Event()
    database = calls_on(repo)
    pacer = Pacer(config, stats)
    reservations = Reservations(config, database, Finalizer(database, stats), stats, InlineExecutor(), pacer)
    breaker = Breaker(config, database, stats, random.Random(0))
    loop = ClaimLoop(config, database, slots, pacer, stats, stopping, reservations, breaker)
    delivered: list[Claim] = []

    def deliver(c: Claim) -> None:
        delivered.append(c)
        slots.free_one()
        if len(delivered) == until:
            stopping.set()

    loop.run(InlineExecutor(), deliver, lambda: None)
    return delivered


def test_the_loop_claims_no_more_than_the_free_slots_and_backs_off_when_the_database_is_down() -> None:
    config = load_config(
        {"dsn": "mysql://u@h/db", "concurrency": "4", "batch_size": "8", "poll_interval": "0.05"}, {}
    )
    repo = FakeRepository(backlog=[email(i) for i in range(10)])
    repo.errors = [DatabaseUnavailable("gone")]
    delivered = run_loop(config, repo, Slots(config.concurrency, WorkerStats()), until=10)
    limits = [args[0] for name, args in repo.calls if name == "claim"]
    assert [c.id for c in delivered] == list(range(10))
    assert limits[0] == 4 and max(limits) <= 4, "never more rows than free slots"
    assert len(limits) >= 4, "the failed claim was tried again, and the process stayed up"


class GatherCountingSlots(Slots):
    def __init__(self, concurrency: int, stats: WorkerStats) -> None:
        super().__init__(concurrency, stats)
        self.gathers: list[int] = []

    def wait_for_more(self, want: int, timeout: float) -> int:
        self.gathers.append(want)
        return super().wait_for_more(want, 0)


@pytest.mark.parametrize(("due", "gathers"), [(10, 4), (1, 0)])
def test_with_fast_sends_the_loop_gathers_every_slot_only_while_claims_come_back_full(
    due: int, gathers: int
) -> None:
    config = load_config({"dsn": "mysql://u@h/db", "concurrency": "4", "poll_interval": "0.05"}, {})
    repo = FakeRepository(backlog=[email(i) for i in range(due)])
    slots = GatherCountingSlots(config.concurrency, WorkerStats())
    slots.take(2)  # two sends still on the wire throughout
    assert len(run_loop(config, repo, slots, until=due)) == due
    assert slots.gathers == [4] * gathers, (
        "the first claim, and any after one that came back short, go at once"
    )


def test_gathering_slots_returns_once_enough_are_free_or_the_wait_is_over() -> None:
    slots = Slots(4, WorkerStats())
    slots.take(4)
    freer = threading.Timer(0.01, lambda: (slots.free_one(), slots.free_one()))
    freer.start()
    started = time.monotonic()
    assert slots.wait_for_more(2, 5.0) == 2
    assert time.monotonic() - started < 4, "woken by the second free, not by the timeout"
    assert slots.wait_for_more(4, 0.01) == 2, "the wait is bounded: it claims with what is free"


def test_the_progress_line_is_info_and_per_email_lines_are_debug(caplog: pytest.LogCaptureFixture) -> None:
    from email_outbox.worker.progress import ProgressLine

    caplog.set_level(logging.INFO, logger="email_outbox.worker")
    repo, sender = FakeRepository(), FakeSender()
    parts, _ = delivery(repo, sender)
    stats = parts._stats
    for row in range(3):
        parts.deliver(claim(row))
    ProgressLine(stats, 10).write()
    assert [r.getMessage() for r in caplog.records] == ["progress"]
    assert caplog.records[0].Sent == 3  # type: ignore[attr-defined]


class HeldExecutor(Executor):
    """Runs nothing until told: what was submitted is still on its way."""

    def __init__(self) -> None:
        self.queued: list[Callable[[], Any]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.queued.append(lambda: fn(*args, **kwargs))
        return Future()

    def run_queued(self) -> None:
        queued, self.queued = self.queued, []
        for fn in queued:
            fn()


def carrying_on(
    repo: FakeRepository, concurrency: int = 3, refill: Executor | None = None, rate: str | None = None
) -> tuple[ClaimLoop, Pacer, WorkerStats, threading.Event]:
    config = load_config(
        {"dsn": "mysql://u@h/db", "concurrency": str(concurrency), "max_send_rate": rate}, {}
    )
    stats, stopping = WorkerStats(), threading.Event()
    database = calls_on(repo)
    pacer = Pacer(config, stats)
    reservations = Reservations(
        config, database, Finalizer(database, stats), stats, refill or InlineExecutor(), pacer
    )
    slots = Slots(config.concurrency, stats)
    breaker = Breaker(config, database, stats, random.Random(0))
    loop = ClaimLoop(config, database, slots, pacer, stats, stopping, reservations, breaker)
    return loop, pacer, stats, stopping


def test_a_slot_with_slow_sends_takes_reservations_reserved_a_batch_at_a_time() -> None:
    repo = FakeRepository(backlog=[email(i) for i in range(1, 6)])
    loop, _, stats, _ = carrying_on(repo)
    for _ in range(9):
        stats.record_send("accepted", 0.05)
    assert loop.next_for_held_slot() is None, "too few sends yet to call the provider slow"
    for _ in range(12):
        stats.record_send("accepted", 0.001)
    assert loop.next_for_held_slot() is None, "a fast provider: the loop claims for many slots at once"
    for _ in range(30):
        stats.record_send("accepted", 0.05)
    taken = [loop.next_for_held_slot() for _ in range(5)]
    assert [c.id for c in taken if c] == [1, 2, 3, 4, 5]
    # The third take left none: the next batch (4, 5) was reserved then. It came back short, so no
    # more is reserved in the background.
    assert [name for name, _ in repo.calls] == ["reserve"] * 2, "one claim per 3 rows, not per row"
    assert loop.next_for_held_slot() is None, "nothing due: the slot goes idle"
    assert [name for name, _ in repo.calls] == ["reserve"] * 3, "asked once more, on the send path"


def test_with_fast_sends_a_slot_carries_on_only_through_a_backlog() -> None:
    """Fast sends with a backlog: the slots take reservations (their next rows start in the same
    call as their finalizes, and the next batch is reserved off the send path); once a reserve comes
    back short the backlog is worked, and the slots go back to the loop after the rows they hold."""
    repo = FakeRepository(backlog=[email(i) for i in range(1, 36)])
    loop, _, stats, _ = carrying_on(repo, concurrency=8)
    for _ in range(20):
        stats.record_send("accepted", 0.001)
    assert loop.next_for_held_slot() is None, "no claim yet says there is a backlog"
    stats.record_claim(8, 8)
    taken = [loop.next_for_held_slot() for _ in range(35)]
    assert [c.id for c in taken if c] == list(range(1, 36))
    assert repo.calls == [("reserve", (32,)), ("reserve", (32,))], "32 (four batches ahead), then the 3 left"
    assert not stats.backlogged, "the second reserve came back short"
    assert loop.next_for_held_slot() is None and len(repo.calls) == 2, "no reserve without a backlog"


@pytest.mark.parametrize(
    ("send_seconds", "backlog", "asked"),
    [
        (0.05, True, 32),  # 0.25 s ahead is 5 rounds of sends: capped at MAX_BATCHES_AHEAD
        (0.1, True, 16),  # 0.25 s ahead is 2 rounds
        (1.0, True, 8),  # a round takes longer than the time ahead: one batch
        (0.05, False, 8),  # no backlog: one batch, as many as the slots
    ],
)
def test_through_a_backlog_one_reserve_holds_the_rows_of_a_quarter_second_of_sends(
    send_seconds: float, backlog: bool, asked: int
) -> None:
    """A claim's fixed cost dominates a small one, so through a backlog a reserve asks for the rows
    the replica sends in RESERVE_AHEAD_SECONDS, up to MAX_BATCHES_AHEAD batches of `concurrency`."""
    repo = FakeRepository(backlog=[email(i) for i in range(1, 100)])
    loop, _, stats, _ = carrying_on(repo, concurrency=8)
    for _ in range(20):
        stats.record_send("accepted", send_seconds)
    stats.record_claim(8, 8 if backlog else 9)
    assert loop.next_for_held_slot() is not None
    assert repo.calls == [("reserve", (asked,))]


def test_the_next_batch_is_reserved_off_the_send_path_once_few_are_left() -> None:
    repo = FakeRepository(backlog=[email(i) for i in range(1, 20)])
    background = HeldExecutor()
    loop, _, stats, _ = carrying_on(repo, concurrency=8, refill=background)
    for _ in range(10):
        stats.record_send("accepted", 0.05)
    taken = [loop.next_for_held_slot() for _ in range(6)]
    assert [c.id for c in taken if c] == [1, 2, 3, 4, 5, 6]
    assert [name for name, _ in repo.calls] == ["reserve"], "the first batch: no reservation was held"
    assert len(background.queued) == 1, "two of eight left: the next batch goes to the background"
    assert [c.id for c in (loop.next_for_held_slot(), loop.next_for_held_slot()) if c] == [7, 8]
    assert len(background.queued) == 1 and len(repo.calls) == 1, "one background reserve at a time"
    background.run_queued()
    assert [name for name, _ in repo.calls] == ["reserve", "reserve"]
    nxt = loop.next_for_held_slot()
    assert nxt is not None and nxt.id == 9, "the slot took the background batch's first row"
    assert len(repo.calls) == 2, "without a claim of its own"


def test_a_reserve_that_fails_gives_its_rate_token_back() -> None:
    repo = FakeRepository(backlog=[email(i) for i in range(1, 4)])
    loop, _, stats, _ = carrying_on(repo, rate="0.001")  # one token, then none for 1,000 s
    for _ in range(10):
        stats.record_send("accepted", 0.05)
    repo.errors.append(AccessDenied("reserve refused"))
    with pytest.raises(AccessDenied):
        loop.next_for_held_slot()
    nxt = loop.next_for_held_slot()
    assert nxt is not None and nxt.id == 1, "the token the failed reserve took came back"


def test_shutting_down_stops_the_slots_taking_rows_also_after_the_claim_loop_failed() -> None:
    """Only a signal used to set `stopping`: after the claim loop died of an error, slots with slow
    sends went on taking reservations while the process waited for them to finish."""
    repo = FakeRepository(backlog=[email(i) for i in range(1, 4)])
    config = load_config({"dsn": "mysql://u@h/db"}, {})
    worker = Worker(config, FakeSender(), repository_factory=lambda: cast(OutboxRepository, repo))
    for _ in range(10):
        worker.stats.record_send("accepted", 0.05)
    worker._drain(ThreadPoolExecutor(1))
    assert worker.stopping.is_set()
    assert worker.loop.next_for_held_slot() is None and repo.calls == []


def test_reservations_are_given_back_when_the_slot_stops_carrying_on() -> None:
    repo = FakeRepository(backlog=[email(i) for i in range(1, 4)])
    loop, pacer, stats, _ = carrying_on(repo)
    for _ in range(10):
        stats.record_send("accepted", 0.05)
    assert loop.next_for_held_slot() is not None
    pacer.apply(Effect.PAUSE_REPLICA)
    assert loop.next_for_held_slot() is None, "a paused replica does not carry on"
    names = [name for name, _ in repo.calls]
    assert names == ["reserve", "finalize_batch"], "the two left are released in one call"
    assert [(i.id, i.outcome) for i in repo.calls[1][1]] == [(2, "Released"), (3, "Released")]


def test_the_next_rows_start_rides_with_the_finalize_and_only_a_started_row_is_sent() -> None:
    repo, sender = FakeRepository(), FakeSender()
    parts, _ = delivery(repo, sender)
    following = claim(2)
    assert parts.deliver(claim(1), lambda: following) is following
    assert [name for name, _ in repo.calls] == ["finalize_and_start"], "one call, without the batch's JSON"
    item, next_id, _ = repo.calls[0][1]
    assert (item.id, item.outcome, item.provider_message_id, next_id) == (1, "Sent", "m-1", 2)
    refused = FakeRepository()
    parts, _ = delivery(refused, sender)
    assert parts.deliver(claim(3), lambda: Claim(email(4), "stolen", time.monotonic() + 60)) is None
    assert [name for name, _ in refused.calls] == ["finalize_and_start", "release_claim"], (
        "a start not confirmed is given back, never left started and unsent"
    )


def test_giving_reservations_back_waits_for_a_background_reserve_and_gives_its_rows_back_too() -> None:
    repo = FakeRepository(backlog=[email(i) for i in range(1, 8)])
    background = ThreadPoolExecutor(max_workers=1)
    loop, pacer, stats, _ = carrying_on(repo, concurrency=4, refill=background)
    for _ in range(10):
        stats.record_send("accepted", 0.05)
    gate = threading.Event()
    first_reserve = repo.reserve_batch

    def slow_reserve(*args: Any) -> list[ClaimedEmail]:
        if repo.calls:  # the background one waits at the gate
            gate.wait(5)
        return first_reserve(*args)

    repo.reserve_batch = slow_reserve  # type: ignore[method-assign]
    assert [
        c.id for c in (loop.next_for_held_slot(), loop.next_for_held_slot(), loop.next_for_held_slot()) if c
    ] == [1, 2, 3]
    pacer.apply(Effect.PAUSE_REPLICA)
    threading.Timer(0.05, gate.set).start()
    assert loop.next_for_held_slot() is None, "paused: every reservation goes back"
    released = [i.id for name, args in repo.calls if name == "finalize_batch" for i in args]
    assert released == [4, 5, 6, 7], "the one held and the three reserved in the background meanwhile"
    background.shutdown(wait=True)


def test_a_reserve_executor_already_shut_down_leaves_the_slot_carrying_on_and_nothing_waiting() -> None:
    repo = FakeRepository(backlog=[email(i) for i in range(1, 8)])
    background = ThreadPoolExecutor(max_workers=1)
    background.shutdown()
    loop, pacer, stats, _ = carrying_on(repo, concurrency=4, refill=background)
    for _ in range(10):
        stats.record_send("accepted", 0.05)
    taken = [loop.next_for_held_slot() for _ in range(5)]
    assert [c.id for c in taken if c] == [1, 2, 3, 4, 5], "each batch reserved on the slot instead"
    pacer.apply(Effect.PAUSE_REPLICA)
    assert loop.next_for_held_slot() is None, "giving back does not wait for a reserve that never ran"


def test_a_slot_reserves_only_rows_it_has_rate_tokens_for_and_none_sits_unstarted() -> None:
    """Issue 27, item 5: reservations were taken without rate tokens; when a slot then found none at
    hand, the rows it had reserved were neither started nor given back, and sat for half a lease."""
    repo = FakeRepository(backlog=[email(i) for i in range(1, 6)])
    loop, pacer, stats, _ = carrying_on(repo, concurrency=4, rate="0.001")  # one token, then none
    for _ in range(10):
        stats.record_send("accepted", 0.05)
    first = loop.next_for_held_slot()
    assert first is not None and first.id == 1
    assert repo.calls == [("reserve", (1,))], "one token at hand: one row reserved, not a slot's batch"
    assert loop.next_for_held_slot() is None, "no token: the slot goes idle"
    assert len(loop._reservations) == 0 and len(repo.backlog) == 4, "nothing held without its token"
    pacer.give_back(1)
    nxt = loop.next_for_held_slot()
    assert nxt is not None and nxt.id == 2, "a token back: the next row is reserved and started"
