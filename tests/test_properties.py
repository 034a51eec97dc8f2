"""Property tests against the real server (hypothesis).

1. A stateful test: random sequences of enqueue, claim (both paths), sweep, finalize (sent, failure,
   unknown), release, extend, requeue and resolve from several simulated workers with tokens of their
   own, and old tokens kept to replay later, with the database clock moved by `SET timestamp`. A model
   predicts every row's status and attempt count. After every step the database must agree with the
   model and with these invariants:
   - a row is held by at most one token;
   - only the holder's finalize lands;
   - terminal states change only through the operator procedures;
   - `UnknownOutcome` is never claimed;
   - attempt_count never exceeds max_attempts;
   - the event log replayed from the start equals the current row.
2. Input fuzzing of `email_enqueue` and the operator procedures with generated text: any Unicode,
   4-byte characters, control characters, NUL, very long values, SQL metacharacters. Every call either
   stores the values byte-exact or is refused with SQLSTATE 45000. It never raises a different error
   and never leaves a partial row.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest
from email_outbox.display import UNSAFE_CHARACTERS
from email_outbox.dsn import DatabaseDsn
from email_outbox.errors import InvalidInput
from email_outbox.models import Status
from email_outbox.repository import OutboxRepository
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.conftest import set_clock
from tests.harness import TestServer

WORKERS = ("w1", "w2", "w3")
TERMINAL = {Status.SENT, Status.FAILED, Status.UNKNOWN_OUTCOME}
CLAIMABLE = {Status.PENDING, Status.RETRYING}


@dataclass
class ModelRow:
    status: Status
    attempt_count: int
    max_attempts: int
    next_attempt_at: datetime
    token: str | None = None
    lease_expires_at: datetime | None = None
    claimed_from: Status | None = None


def _read_rows(repo: OutboxRepository) -> dict[int, dict[str, Any]]:
    cursor = repo.connection.cursor(dictionary=True)
    cursor.execute(
        "SELECT id, CAST(status AS CHAR) AS status, attempt_count, max_attempts, next_attempt_at,"
        " claim_token, lease_expires_at FROM email_delivery_attempts"
    )
    rows = {int(r["id"]): r for r in cursor.fetchall()}
    cursor.close()
    return rows


def _read_events(repo: OutboxRepository) -> list[dict[str, Any]]:
    cursor = repo.connection.cursor(dictionary=True)
    cursor.execute(
        "SELECT attempt_id, CAST(from_status AS CHAR) AS from_status, CAST(to_status AS CHAR) AS to_status,"
        " claim_token FROM email_delivery_events ORDER BY id"
    )
    events: list[dict[str, Any]] = cursor.fetchall()
    cursor.close()
    return events


class OutboxMachine(RuleBasedStateMachine):
    dsn: DatabaseDsn
    server: TestServer

    def __init__(self) -> None:
        super().__init__()
        self.server.truncate(self.dsn)
        self.repos = {name: OutboxRepository.open(self.dsn) for name in (*WORKERS, "operator")}
        self.model: dict[int, ModelRow] = {}
        self.held: dict[str, dict[int, str]] = {w: {} for w in WORKERS}
        self.old_tokens: list[tuple[int, str]] = []
        self.names = itertools.count()
        self.clock = datetime(2030, 1, 1, 12, 0, 0)
        self.sync_clock()

    def teardown(self) -> None:
        for repo in self.repos.values():
            repo.close()

    def sync_clock(self) -> None:
        for repo in self.repos.values():
            set_clock(repo, self.clock)

    @property
    def ops(self) -> OutboxRepository:
        return self.repos["operator"]

    def token_for(self, worker: str, pick: int) -> tuple[int, str] | None:
        held = sorted(self.held[worker].items())
        return held[pick % len(held)] if held else None

    def forget_claim(self, attempt_id: int) -> None:
        for worker in WORKERS:
            token = self.held[worker].pop(attempt_id, None)
            if token is not None:
                self.old_tokens.append((attempt_id, token))

    def claimable(self) -> list[int]:
        return sorted(
            (i for i, r in self.model.items()
             if r.status in CLAIMABLE and r.next_attempt_at <= self.clock and r.attempt_count < r.max_attempts),
            key=lambda i: (self.model[i].next_attempt_at, i),
        )  # fmt: skip

    def stale(self) -> set[int]:
        return {
            i
            for i, r in self.model.items()
            if r.status is Status.PROCESSING
            and r.lease_expires_at is not None
            and r.lease_expires_at <= self.clock
        }

    def apply_sweep(self, swept: set[int]) -> None:
        for i in swept:
            row = self.model[i]
            row.status, row.attempt_count = Status.UNKNOWN_OUTCOME, row.attempt_count + 1
            row.token = row.lease_expires_at = None
            self.forget_claim(i)

    def take(self, attempt_id: int, worker: str, token: str, lease: int) -> None:
        row = self.model[attempt_id]
        row.claimed_from, row.status = row.status, Status.PROCESSING
        row.token, row.lease_expires_at = token, self.clock + timedelta(seconds=lease)
        self.held[worker][attempt_id] = token

    def finish(self, attempt_id: int, status: Status, *, counts: bool) -> None:
        row = self.model[attempt_id]
        row.status = status
        row.attempt_count += 1 if counts else 0
        row.token = row.lease_expires_at = row.claimed_from = None
        self.forget_claim(attempt_id)

    # --- rules ------------------------------------------------------------------------------------
    @initialize(n=st.integers(2, 6), max_attempts=st.integers(1, 3))
    def start(self, n: int, max_attempts: int) -> None:
        # Every example starts with due rows, so its steps act on something.
        self.enqueue(n, max_attempts, 0)

    @rule(n=st.integers(1, 3), max_attempts=st.integers(1, 3), delay=st.integers(0, 30))
    def enqueue(self, n: int, max_attempts: int, delay: int) -> None:
        for _ in range(n):
            result = self.ops.enqueue(
                f"p-{next(self.names)}",
                "a@example.com",
                "s",
                text_body="t",
                max_attempts=max_attempts,
                send_after=self.clock + timedelta(seconds=delay),
            )
            assert result.affected == 1
            self.model[result.attempt_id] = ModelRow(
                Status.PENDING, 0, max_attempts, self.clock + timedelta(seconds=delay)
            )

    @rule(seconds=st.integers(1, 90))
    def advance_clock(self, seconds: int) -> None:
        self.clock += timedelta(seconds=seconds)
        self.sync_clock()

    @rule(worker=st.sampled_from(WORKERS), limit=st.integers(1, 4), lease=st.integers(5, 60))
    def claim_batch(self, worker: str, limit: int, lease: int) -> None:
        stale_before = self.stale()
        expected = self.claimable()
        token = uuid.uuid4().hex
        claimed = self.repos[worker].claim_batch(token, worker, lease, limit)
        # The claim sweeps up to `limit` stale leases first; which ones is the server's choice.
        actual = _read_rows(self.ops)
        swept = {i for i in stale_before if actual[i]["status"] == "UnknownOutcome"}
        assert len(swept) == min(limit, len(stale_before))
        self.apply_sweep(swept)
        ids = [c.id for c in claimed]
        assert ids == expected[:limit], "the oldest due claimable rows, in order, none skipped"
        for i in ids:
            self.take(i, worker, token, lease)

    @precondition(lambda self: self.model)
    @rule(worker=st.sampled_from(WORKERS), pick=st.integers(0, 1000), lease=st.integers(5, 60))
    def try_claim(self, worker: str, pick: int, lease: int) -> None:
        attempt_id = sorted(self.model)[pick % len(self.model)]
        token = uuid.uuid4().hex
        affected = self.repos[worker].try_claim(attempt_id, token, worker, lease)
        assert affected == (1 if attempt_id in self.claimable() else 0)
        if affected:
            self.take(attempt_id, worker, token, lease)

    @rule(limit=st.integers(1, 50))
    def sweep(self, limit: int) -> None:
        stale = self.stale()
        affected = self.ops.sweep_stale_leases(limit)
        assert affected == min(limit, len(stale))
        actual = _read_rows(self.ops)
        self.apply_sweep({i for i in stale if actual[i]["status"] == "UnknownOutcome"})

    def candidates(self) -> list[tuple[str, int, str]]:
        """(worker, row, token): every live claim, and every old token kept for replay."""
        live = [(w, i, t) for w in WORKERS for i, t in sorted(self.held[w].items())]
        old = [(WORKERS[n % len(WORKERS)], i, t) for n, (i, t) in enumerate(self.old_tokens)]
        return live + old

    def has_candidates(self) -> bool:
        return bool(self.candidates())

    def holder_call(self, pick: int) -> tuple[str, int, str, bool]:
        """A claim to finalize with: a live one (lands) or an old token replayed (never lands)."""
        worker, attempt_id, token = self.candidates()[pick % len(self.candidates())]
        row = self.model[attempt_id]
        lands = row.status is Status.PROCESSING and row.token == token
        assert lands == (self.held[worker].get(attempt_id) == token), "an old token is never the holder's"
        return worker, attempt_id, token, lands

    @precondition(has_candidates)
    @rule(pick=st.integers(0, 1000))
    def finalize_sent(self, pick: int) -> None:
        worker, attempt_id, token, lands = self.holder_call(pick)
        assert self.repos[worker].finalize_sent(attempt_id, token, "msg-" + token[:8]) == int(lands)
        if lands:
            self.finish(attempt_id, Status.SENT, counts=True)

    @precondition(has_candidates)
    @rule(pick=st.integers(0, 1000), permanent=st.booleans(), delay=st.integers(0, 60))
    def finalize_failure(self, pick: int, permanent: bool, delay: int) -> None:
        worker, attempt_id, token, lands = self.holder_call(pick)
        result = self.repos[worker].finalize_failure(
            attempt_id,
            token,
            permanent=permanent,
            error_code="E",
            error_message="m",
            retry_delay_seconds=delay,
        )
        assert result.affected == int(lands)
        if lands:
            row = self.model[attempt_id]
            gives_up = permanent or row.attempt_count + 1 >= row.max_attempts
            assert result.status is (Status.FAILED if gives_up else Status.RETRYING)
            if not gives_up:
                row.next_attempt_at = self.clock + timedelta(seconds=delay)
            self.finish(attempt_id, Status.FAILED if gives_up else Status.RETRYING, counts=True)

    @precondition(has_candidates)
    @rule(pick=st.integers(0, 1000))
    def finalize_unknown(self, pick: int) -> None:
        worker, attempt_id, token, lands = self.holder_call(pick)
        assert self.repos[worker].finalize_unknown(attempt_id, token, "timeout") == int(lands)
        if lands:
            self.finish(attempt_id, Status.UNKNOWN_OUTCOME, counts=True)

    @precondition(has_candidates)
    @rule(pick=st.integers(0, 1000), delay=st.integers(0, 60))
    def release(self, pick: int, delay: int) -> None:
        worker, attempt_id, token, lands = self.holder_call(pick)
        assert self.repos[worker].release_claim(attempt_id, token, delay) == int(lands)
        if lands:
            row = self.model[attempt_id]
            back = row.claimed_from or Status.PENDING
            row.next_attempt_at = self.clock + timedelta(seconds=delay)
            self.finish(attempt_id, back, counts=False)

    @precondition(has_candidates)
    @rule(pick=st.integers(0, 1000), lease=st.integers(5, 60))
    def extend(self, pick: int, lease: int) -> None:
        worker, attempt_id, token, lands = self.holder_call(pick)
        row = self.model[attempt_id]
        # An extension after the lease has passed does not land, even before the sweep.
        lands = lands and row.lease_expires_at is not None and row.lease_expires_at > self.clock
        assert self.repos[worker].extend_lease(attempt_id, token, lease) == int(lands)
        if lands:
            row.lease_expires_at = self.clock + timedelta(seconds=lease)

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 1000))
    def requeue(self, pick: int) -> None:
        attempt_id = sorted(self.model)[pick % len(self.model)]
        row = self.model[attempt_id]
        lands = row.status is Status.UNKNOWN_OUTCOME
        assert self.ops.requeue_unknown_outcome(attempt_id, "op", "checked") == int(lands)
        if lands:
            row.status, row.next_attempt_at = Status.PENDING, self.clock
            row.max_attempts = max(row.max_attempts, row.attempt_count + 1)

    @precondition(lambda self: self.model)
    @rule(pick=st.integers(0, 1000), outcome=st.sampled_from(["Sent", "Failed"]))
    def resolve(self, pick: int, outcome: str) -> None:
        attempt_id = sorted(self.model)[pick % len(self.model)]
        row = self.model[attempt_id]
        lands = row.status is Status.UNKNOWN_OUTCOME
        assert self.ops.resolve_unknown_outcome(attempt_id, outcome, "op", "checked SES") == int(lands)
        if lands:
            row.status = Status(outcome)

    # --- invariants -----------------------------------------------------------------------------
    @invariant()
    def database_agrees_with_the_model(self) -> None:
        actual = _read_rows(self.ops)
        assert set(actual) == set(self.model), "no row lost or invented"
        for i, row in self.model.items():
            a = actual[i]
            assert a["status"] == row.status.value, f"row {i}"
            assert a["attempt_count"] == row.attempt_count, f"row {i}"
            assert a["attempt_count"] <= a["max_attempts"] == row.max_attempts, f"row {i}"
            # Held by exactly its one token while Processing, by none otherwise.
            assert (a["claim_token"] is not None) == (row.status is Status.PROCESSING), f"row {i}"
            assert a["claim_token"] == row.token, f"row {i}"
            if row.status in CLAIMABLE:
                assert a["next_attempt_at"] == row.next_attempt_at, f"row {i}"
        holders = [i for w in WORKERS for i in self.held[w]]
        assert len(holders) == len(set(holders)), "a row believed held by two workers"

    @invariant()
    def event_log_replays_to_the_current_row(self) -> None:
        state: dict[int, str | None] = {}
        for e in _read_events(self.ops):
            i, before, after = int(e["attempt_id"]), e["from_status"], e["to_status"]
            assert state.get(i) == before, f"row {i}: event from {before} but the row was {state.get(i)}"
            assert not (before == "UnknownOutcome" and after == "Processing"), "UnknownOutcome claimed"
            if before in ("Sent", "Failed"):
                raise AssertionError(f"row {i}: a terminal state changed ({before} -> {after})")
            if before == "UnknownOutcome":
                assert after in ("Pending", "Sent", "Failed"), "only an operator moves UnknownOutcome"
            state[i] = after
        assert state == {i: r.status.value for i, r in self.model.items()}


@pytest.mark.slow
def test_state_machine(server: TestServer, dsn: DatabaseDsn) -> None:
    OutboxMachine.dsn = dsn
    OutboxMachine.server = server
    run_state_machine_as_test(
        OutboxMachine,
        settings=settings(
            max_examples=100,
            stateful_step_count=50,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            derandomize=True,
        ),
    )


# --- input fuzzing ---------------------------------------------------------------------------------
# Any Unicode scalar (surrogates cannot be encoded), 4-byte emoji, controls and NUL included.
any_text = st.text(st.characters(codec="utf-8"), max_size=40)
hostile = st.one_of(
    any_text,
    st.sampled_from(["'", '"', "\\", "%", "_", "`", "'; DROP TABLE email_delivery_attempts; --", "\x00", "\r\n",
                     "😀" * 200, "a" * 191, "a" * 192, "é" * 320, " ", "NULL", "\\'", "\t", "\x1b[31m", "\x7f",
                     "\x85", "\u2028", "\u2029", "\u202e", "\u2067", "\u200e", "\u061c", ",", ";", "<", ">", "(",
                     "a@x.com,b@y.com"]),
    st.builds(lambda n, c: c * n, st.integers(150, 1100), st.sampled_from(["a", "é", "😀", "\x01"])),
)  # fmt: skip


def _breaks_text_rule(*values: str | None) -> bool:
    """The SQL rule set (email_internal_check_text), restated: the fuzzers check the two agree."""
    return any(v is not None and UNSAFE_CHARACTERS.search(v) is not None for v in values)


def _not_one_address(value: str | None) -> bool:
    if value is None:
        return False
    local, _, domain = value.partition("@")
    return (
        len(value) > 320
        or value.count("@") != 1
        or not local
        or not domain
        or any(c in value for c in ' ,;<>"()\\')
        or _breaks_text_rule(value)
    )


def _stored(repo: OutboxRepository, attempt_id: int) -> dict[str, Any]:
    cursor = repo.connection.cursor(dictionary=True)
    cursor.execute(
        "SELECT notification_id, to_address, from_address, subject, text_body, html_body"
        " FROM email_delivery_attempts WHERE id = %s",
        (attempt_id,),
    )
    row: dict[str, Any] = cursor.fetchone()
    cursor.fetchall()
    cursor.close()
    return row


def _count(repo: OutboxRepository, table: str) -> int:
    cursor = repo.connection.cursor()
    cursor.execute(f"SELECT COUNT(*) FROM {table}")
    (n,) = cursor.fetchone()  # type: ignore[misc]
    cursor.close()
    return int(n)


@pytest.mark.slow
def test_enqueue_fuzz_stores_byte_exact_or_refuses_with_45000(server: TestServer, dsn: DatabaseDsn) -> None:
    server.truncate(dsn)
    repo = OutboxRepository.open(dsn)
    counter = itertools.count()

    @settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(
        nid=hostile,
        local=hostile,
        domain=hostile,
        from_addr=st.one_of(st.none(), hostile),
        subject=hostile,
        text=st.one_of(st.none(), hostile),
        html=st.one_of(st.none(), hostile),
    )
    def check(
        nid: str,
        local: str,
        domain: str,
        from_addr: str | None,
        subject: str,
        text: str | None,
        html: str | None,
    ) -> None:
        to = f"{local}@{domain}"
        nid = f"{next(counter)}:{nid}"  # unique, so a duplicate never hides a refusal
        before = (_count(repo, "email_delivery_attempts"), _count(repo, "email_delivery_events"))
        must_refuse = _breaks_text_rule(nid, subject) or _not_one_address(to) or _not_one_address(from_addr)
        try:
            result = repo.enqueue(nid, to, subject, text_body=text, html_body=html, from_address=from_addr)
        except InvalidInput as exc:
            assert str(exc).startswith("email_enqueue: "), str(exc)
            after = (_count(repo, "email_delivery_attempts"), _count(repo, "email_delivery_events"))
            assert after == before, "a refused enqueue wrote nothing"
            return
        assert not must_refuse, "a header or log field breaking the rule set was accepted"
        assert result.affected == 1
        stored = _stored(repo, result.attempt_id)
        assert stored == {
            "notification_id": nid,
            "to_address": to,
            "from_address": from_addr,
            "subject": subject,
            "text_body": text,
            "html_body": html,
        }, "stored byte-exact"

    try:
        check()
    finally:
        repo.close()


@pytest.mark.slow
def test_operator_procedures_fuzz_refuse_with_45000_or_store_exactly(
    server: TestServer, dsn: DatabaseDsn
) -> None:
    server.truncate(dsn)
    repo = OutboxRepository.open(dsn)

    def unknown_row() -> int:
        attempt_id = repo.enqueue(uuid.uuid4().hex, "a@example.com", "s", text_body="t").attempt_id
        token = uuid.uuid4().hex
        assert repo.try_claim(attempt_id, token, "w", 60) == 1
        assert repo.finalize_unknown(attempt_id, token, "t") == 1
        return attempt_id

    @settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(by=hostile, reason=hostile, message_id=st.one_of(st.none(), hostile), requeue=st.booleans())
    def check(by: str, reason: str, message_id: str | None, requeue: bool) -> None:
        attempt_id = unknown_row()
        events_before = _count(repo, "email_delivery_events")
        must_refuse = _breaks_text_rule(by, reason, None if requeue else message_id)
        try:
            if requeue:
                affected = repo.requeue_unknown_outcome(attempt_id, by, reason)
            else:
                affected = repo.resolve_unknown_outcome(attempt_id, "Sent", by, reason, message_id)
        except InvalidInput as exc:
            assert str(exc).startswith(("email_requeue_unknown_outcome: ", "email_resolve_unknown_outcome: "))
            assert repo.get_row(attempt_id).status is Status.UNKNOWN_OUTCOME, "nothing written"
            assert _count(repo, "email_delivery_events") == events_before
            return
        assert not must_refuse, "an operator field breaking the rule set was accepted"
        assert affected == 1
        row = repo.get_row(attempt_id)
        event = repo.events(attempt_id)[-1]
        assert event.actor == by, "the operator's name is stored exactly"
        assert reason in (event.detail or ""), "the reason is stored exactly"
        if requeue:
            assert row.status is Status.PENDING
        else:
            assert row.status is Status.SENT and row.provider_message_id == message_id

    try:
        check()
    finally:
        repo.close()
