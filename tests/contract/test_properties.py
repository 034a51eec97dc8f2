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

import base64
import itertools
import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
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

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.display import UNSAFE_CHARACTERS
from email_outbox.errors import InvalidInput, OutboxError
from email_outbox.models import Status
from email_outbox_devtools.localdb import LOCAL_CONFIGURATION_SET
from tests.conftest import set_clock
from tests.support.harness import TestServer

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
        or any(c in value for c in ' ,;<>"()\\\u200c\u200d')
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
        must_refuse = (
            _breaks_text_rule(nid, subject)
            or _not_one_address(to)
            or _non_ascii_local_part(to)
            or _not_one_address(from_addr)
        )
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


# --- email_enqueue_message documents ---------------------------------------------------------------
# Generated documents mix valid members with wrong types, missing keys, huge lists, bad base64, hostile
# header names and values, any Unicode (4-byte characters included) and random display names. The
# rules are restated here (docs/procedures.md) so the fuzzer knows which documents must be refused:
# each example ends in a clean 45000 from email_enqueue_message with nothing written, or in a stored
# message whose every stored field equals what was sent.
#
# What the fuzzer found in email_enqueue_message, now fixed and pinned by the tests at the end of this
# file (the documents the fuzzer draws include them): ASCII patterns matched under a case-insensitive
# collation (KELVIN SIGN, LONG S), long header names overflowing a field name, member names known
# case-insensitively but read case-sensitively, members and header names given twice, header and tag
# names read by a JSON path built from them (`-X`, JSON escapes), `attachments: null`, `template:
# null`, and MariaDB's CONVERT_TZ mixing up offsets that are not quarter hours.
MESSAGE_MEMBERS = ("from", "to", "cc", "bcc", "reply_to", "subject", "text", "html", "headers", "tags",
                   "configuration_set", "attachments", "template", "max_attempts", "send_after", "priority",
                   "expires_at")  # fmt: skip
RESERVED_HEADERS = {"from", "to", "cc", "bcc", "subject", "date", "message-id", "mime-version", "return-path",
                    "dkim-signature", "reply-to", "sender", "received", "delivered-to", "authentication-results",
                    "received-spf", "domainkey-signature", "disposition-notification-to",
                    "disposition-notification-options", "return-receipt-to", "errors-to", "x-original-to",
                    "original-recipient"}  # fmt: skip
SEND_AFTER = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})"
)
NAME_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*")
CONTENT_ID = re.compile(r"[A-Za-z0-9!#$%&*+=?^_`{|}~.@-]{1,78}")
HEADER_NAME = re.compile(r"[!-9;-~]{1,76}")

ascii_field = st.text(st.characters(codec="utf-8"), max_size=12)
not_a_string = st.sampled_from([-1, 0, 5, True, False, ["x"], {"a": "b"}, 1.5])
display_name = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=20),
    st.sampled_from(["Ann Lee", "Zoë Ünïcode", "🛟 Support 😀", '"Lee, Ann"', "Lee, Ann", '"A\\"B"', "A<B",
                     "Ann\r\nBcc: evil@example.com", "José\u202e", "\U0001d518\U0001d52b\U0001d526", "  spaced  ", "", "x" * 257]),
)  # fmt: skip
bare_address = st.builds(
    lambda local, domain: f"{local}@{domain}.test",
    st.text("abcxyz0189._+-", min_size=1, max_size=10),
    st.text("abcdef-", min_size=1, max_size=8),
)
mailbox = st.one_of(
    bare_address,
    st.builds(lambda name, address: f"{name} <{address}>", display_name, bare_address),
    hostile,
    st.sampled_from(["a@example.com, b@example.com", "x@example.com\r\nBcc: evil@example.com", "<a@example.com>",
                     "Ann <a@example.com> <b@example.com>", "@example.com", "a@", "a@@b.test"]),
)  # fmt: skip
mailbox_list = st.one_of(
    st.builds(
        lambda good, bad, at: [*good[:at], bad, *good[at:]],
        st.lists(bare_address, max_size=2),
        mailbox,
        st.integers(0, 2),
    ),
    st.lists(mailbox, max_size=4),
    st.lists(bare_address, min_size=20, max_size=30),  # two or three of these make more than 50
    st.lists(bare_address, min_size=51, max_size=55),
    st.lists(bare_address, min_size=48, max_size=50),  # over 50 with the other lists
    st.lists(st.one_of(mailbox, not_a_string), min_size=1, max_size=3),
    not_a_string.filter(lambda v: not isinstance(v, list)),
    st.none(),
)
sender = st.one_of(
    st.builds(lambda name: f"{name} <shop@example.com>", display_name),
    st.just("shop@example.com"),
    st.just("Shop <shop@not-allowed.test>"),
    mailbox,
    not_a_string,
)
header_name = st.one_of(
    st.sampled_from(["List-Unsubscribe", "List-Unsubscribe-Post", "X-Order", 'X"A', "X\\A", "X.A", "X[0]", "$",
                     "Bcc", "bcc", "Content-Type", "content-id", "X-SES-CONFIGURATION-SET", "Resent-To", "Reply-To",
                     "DKIM-Signature", "Message-ID", "X Bad", "X:Bad", "", "X\r\n", "X-😀", "é", "x" * 56]),
    st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=56),
    ascii_field,
).filter(lambda name: not name.startswith("-"))  # fmt: skip
hostile_header_value = st.one_of(
    st.sampled_from(
        ["x\r\nBcc: evil@example.com", "a\nb", "\x00", "\t", "a" * 999, "\u2028", "\u202e", "\x85", "\x7f"]
    ),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=10).map(lambda t: t + "\x1b"),
    not_a_string,
)
header_value = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=30),
    st.sampled_from(["<https://example.com/u/1>, <mailto:u@example.com?subject=1>", "List-Unsubscribe=One-Click",
                     "x\r\nBcc: evil@example.com", "a\nb", "\x00", "\t", "😀" * 998, "a" * 999, "\u2028", ""]),
    not_a_string,
)  # fmt: skip
token = st.one_of(st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True), ascii_field,
                  st.sampled_from(["outbox_id", "OUTBOX_ID", "a b", "x" * 256, "x" * 257, "é", ""]))  # fmt: skip
media_type = st.one_of(
    st.sampled_from(["application/pdf", "image/PNG", "text/plain", "application/vnd.ms-excel", "a/b+c.d",
                     "text", "text/", "/plain", "text/plain; charset=utf-8", "-a/b", "a/" + "b" * 77]),
    ascii_field,
)  # fmt: skip
base64_content = st.one_of(
    st.binary(max_size=300).map(lambda b: base64.b64encode(b).decode()),
    st.binary(min_size=60, max_size=200).map(lambda b: base64.encodebytes(b).decode()),  # MIME line breaks
    st.sampled_from(["%%%", "eA", "eA=", "e", "eA==eA==", "====", "eA==\x00", "é", "eA==!"]),
    not_a_string,
)  # fmt: skip
attachment = st.one_of(
    st.fixed_dictionaries(
        {
            "filename": st.one_of(
                st.text(st.characters(codec="utf-8"), min_size=1, max_size=20),
                st.sampled_from(
                    [
                        "invoice.pdf",
                        "Rechnung März 🧾.pdf",
                        "../etc/passwd",
                        "a\\b",
                        ".",
                        "..",
                        "",
                        "a\x07.txt",
                        "x" * 255,
                        "x" * 256,
                    ]
                ),
                not_a_string,
            ),
            "content_type": st.one_of(media_type, not_a_string),
            "content_base64": base64_content,
        },
        optional={
            "disposition": st.one_of(st.sampled_from(["attachment", "inline", "x", ""]), not_a_string),
            "content_id": st.one_of(
                st.sampled_from(["logo@example.com", "a.b", "<x>", "x" * 79, ""]), ascii_field
            ),
            "size": st.just(1),
        },
    ),
    not_a_string,
)
future_time = st.builds(
    lambda days, seconds, micro, offset: (
        (datetime.now(UTC) + timedelta(days=days, seconds=seconds)).astimezone(
            timezone(timedelta(minutes=offset))
        )
    ).isoformat(timespec=micro),
    st.integers(1, 300),
    st.integers(0, 86399),
    st.sampled_from(["seconds", "milliseconds", "microseconds"]),
    st.integers(-12 * 60, 14 * 60),  # every minute offset from -12:00 to +14:00
)
send_after = st.one_of(
    future_time,
    st.sampled_from(["2026-12-24 09:00:00", "2026-02-30T09:00:00Z", "2026-13-01T00:00:00Z", "2099-01-01T00:00:00Z",
                     "2020-01-01T00:00:00Z", "2027-01-01T00:00:00+05:75", "2027-01-01T00:00:00", "tomorrow"]),
    not_a_string,
)  # fmt: skip


# What each member looks like when it keeps every rule: most members of most documents are drawn
# from these, the rest from the hostile strategies above, so both outcomes stay common.
UNSAFE_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")  # controls, format (bidi) characters, separators
safe_text = st.text(st.characters(codec="utf-8", exclude_categories=UNSAFE_CATEGORIES), max_size=30)
safe_name = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=UNSAFE_CATEGORIES, exclude_characters='<>"\\,;@'),
            max_size=20),
    st.sampled_from(['"Lee, Ann"', '"Müller; Söhne"', "Zoë 🎉", "🛟", "Ann Lee"]),
)  # fmt: skip
good_mailbox = st.one_of(bare_address, st.builds(lambda n, a: f"{n} <{a}>", safe_name, bare_address))
good_attachment = st.fixed_dictionaries(
    {
        "filename": st.one_of(
            st.text(st.characters(codec="utf-8", exclude_categories=UNSAFE_CATEGORIES, exclude_characters="/\\"),
                    min_size=3, max_size=20),
            st.sampled_from(["invoice.pdf", "Rechnung März 🧾.pdf", "x" * 255]),
        ),
        "content_type": st.sampled_from(["application/pdf", "image/PNG", "text/plain", "a/b+c.d"]),
        "content_base64": st.binary(max_size=300).map(lambda b: base64.b64encode(b).decode()),
    },
    optional={
        "disposition": st.sampled_from(["attachment", "inline"]),
        "content_id": st.sampled_from(["logo@example.com", "a.b", "x" * 78]),
    },
)  # fmt: skip
good_members: dict[str, st.SearchStrategy[Any]] = {
    "to": st.lists(good_mailbox, min_size=1, max_size=3),
    "cc": st.lists(good_mailbox, max_size=3),
    "bcc": st.lists(good_mailbox, max_size=2),
    "reply_to": st.lists(good_mailbox, max_size=2),
    "from": st.one_of(st.just("shop@example.com"), st.builds(lambda n: f"{n} <shop@example.com>", safe_name)),
    "subject": st.one_of(safe_text, st.just("😀" * 998)),
    "text": any_text,
    "html": any_text,
    "headers": st.dictionaries(
        st.one_of(st.from_regex(r"X-[A-Za-z0-9-]{1,20}", fullmatch=True),
                  st.sampled_from(["List-Unsubscribe", "List-Unsubscribe-Post", 'X"A', "X\\A", "X.A", "X[0]", "$"])),
        st.one_of(safe_text, st.just("😀" * 998)), max_size=4,
    ),
    "tags": st.dictionaries(st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,19}", fullmatch=True).filter(lambda t: t.lower() != "outbox_id"),
                            st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True), max_size=4),
    "configuration_set": st.just(LOCAL_CONFIGURATION_SET),
    "attachments": st.lists(good_attachment, max_size=3),
    "template": st.fixed_dictionaries({"name": st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)},
                                      optional={"data": st.dictionaries(any_text, any_text, max_size=3)}),
    "max_attempts": st.integers(1, 100),
    "send_after": future_time,
    "priority": st.integers(0, 9),
    # Later than any good send_after (at most 301 days ahead), so a good one keeps its rule.
    "expires_at": future_time.map(lambda t: (datetime.fromisoformat(t) + timedelta(days=301)).isoformat()),
}  # fmt: skip
good_tag = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,19}", fullmatch=True).filter(
    lambda t: t.lower() != "outbox_id"
)
bad_tag = st.one_of(
    st.sampled_from(["outbox_id", "OUTBOX_ID", "a b", "x" * 257, "é", "", "a:b", "a.b"]), ascii_field
)
attachment_faults: dict[str, st.SearchStrategy[Any]] = {
    "filename": st.one_of(
        st.sampled_from(
            [
                "../etc/passwd",
                "a\\b",
                ".",
                "..",
                "",
                "a\x07.txt",
                "x" * 256,
                "a\u202e.txt",
                "a\u2028b",
                "\x00",
                "a\tb",
                "a\x85",
            ]
        ),
        not_a_string,
    ),
    "content_type": st.one_of(
        st.sampled_from(
            ["text", "text/", "/plain", "text/plain; charset=utf-8", "-a/b", "a/" + "b" * 77, "a b/c", "é/b"]
        ),
        not_a_string,
    ),
    "content_base64": st.one_of(
        st.sampled_from(["%%%", "eA", "eA=", "e", "eA==eA==", "====", "é"]), not_a_string
    ),
    "disposition": st.one_of(st.sampled_from(["x", "", "attachments"]), not_a_string),
    "content_id": st.one_of(st.sampled_from(["<x>", "x" * 79, "", "a b", "a/b", "a\x00"]), not_a_string),
    "size": st.just(1),
}


@st.composite
def broken_attachment(draw: st.DrawFn) -> dict[str, Any]:
    """A good attachment with one member broken (or one too many)."""
    item = dict(draw(good_attachment))
    field = draw(st.sampled_from(["filename", "filename", "content_type", *sorted(attachment_faults)]))
    item[field] = draw(attachment_faults[field])
    return item


bad_members: dict[str, st.SearchStrategy[Any]] = {
    "to": mailbox_list,
    "cc": mailbox_list,
    "bcc": mailbox_list,
    "reply_to": mailbox_list,
    "from": sender,
    "subject": st.one_of(hostile, not_a_string),
    "text": not_a_string,
    "html": not_a_string,
    "headers": st.one_of(
        *[st.builds(lambda good, name, value: {**good, name: value}, good_members["headers"],
                    st.sampled_from(["Bcc", "bcc", "Content-Type", "content-id", "CONTENT-LANGUAGE", "X-SES-TENANT",
                                     "x-ses-foo", "Resent-To", "Reply-To", "DKIM-Signature", "Message-ID", "X Bad",
                                     "X:Bad", "", "X-😀", "é", "x" * 77]),
                    st.just("v"))] * 2,
        st.dictionaries(header_name, header_value, max_size=4),
        st.dictionaries(st.from_regex(r"X-[A-Za-z0-9]{1,10}", fullmatch=True), hostile_header_value, min_size=1, max_size=3),
        st.dictionaries(st.from_regex(r"X-[A-Za-z0-9]{1,10}", fullmatch=True), hostile_header_value, min_size=1, max_size=3),
        st.dictionaries(st.from_regex(r"X-[A-Za-z0-9]{1,10}", fullmatch=True), st.just("v"), min_size=51,
                        max_size=53),
        st.just(["X-A"]), st.none(), st.just("X-A: 1"),
    ),
    "tags": st.one_of(
        st.dictionaries(good_tag, st.one_of(bad_tag, not_a_string), min_size=1, max_size=3),
        st.dictionaries(bad_tag.filter(lambda name: not name.startswith("-")), good_tag, min_size=1, max_size=3),
        st.dictionaries(token.filter(lambda name: not name.startswith("-")), st.one_of(token, not_a_string), max_size=4),
        st.dictionaries(st.from_regex(r"t[a-z0-9]{1,10}", fullmatch=True), st.just("v"), min_size=50, max_size=52),
        st.none(), st.just([["a", "b"]]),
    ),
    "configuration_set": st.one_of(token, not_a_string),
    "attachments": st.one_of(
        *[st.builds(lambda good, bad, at: [*good[:at], bad, *good[at:]], st.lists(good_attachment, max_size=2),
                    broken_attachment(), st.integers(0, 2))] * 4,
        st.lists(attachment, min_size=1, max_size=3),
        *[st.builds(lambda good, bad, at: [*good[:at], bad, *good[at:]], st.lists(good_attachment, max_size=2),
                    broken_attachment(), st.integers(0, 2))] * 4,
        st.lists(st.just({"filename": "a.txt", "content_type": "text/plain", "content_base64": "eA=="}),
                 min_size=99, max_size=102),
        st.just({"filename": "a.txt"}), st.just("a.txt"),
    ),
    "template": st.one_of(
        st.fixed_dictionaries({"name": st.one_of(token, not_a_string)},
                              optional={"data": st.one_of(st.dictionaries(any_text, any_text, max_size=3),
                                                          not_a_string), "extra": st.just(1)}),
        not_a_string,
    ),
    "max_attempts": st.one_of(st.integers(-2, 103), st.just("3"), st.just(3.0), st.booleans()),
    "send_after": send_after,
    "priority": st.one_of(st.integers(-2, 11), st.just("9"), st.just(9.0), st.booleans(), st.just(2**63)),
    # send_after's broken shapes, and good times that are not later than a good send_after or now.
    "expires_at": st.one_of(send_after, future_time),
}  # fmt: skip


# The members with the most rules come up more often as the broken one.
BREAKABLE = (*MESSAGE_MEMBERS, *(("attachments",) * 5), *(("headers", "tags", "to") * 2))


@st.composite
def message_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A document with at most one member broken in most examples (each rule seen on its own),
    now and then two or more, and about half the time none."""
    broken = draw(st.one_of(st.none(), st.sampled_from(BREAKABLE)))
    templated = broken == "template" or draw(st.integers(0, 5)) == 0
    doc: dict[str, Any] = {}
    for key in MESSAGE_MEMBERS:
        if key in ("subject", "text", "html"):
            present = draw(st.integers(0, 19)) == 0 if templated else key == "subject" or draw(st.booleans())
        else:
            present = (
                key == "to"
                or (key == "template" and templated)
                or (key != "template" and draw(st.booleans()))
            )
        if present or key == broken:
            bad = key == broken or draw(st.integers(0, 29)) == 0
            doc[key] = draw(bad_members[key] if bad else good_members[key])
    if "text" not in doc and "html" not in doc and not templated and draw(st.integers(0, 9)) > 0:
        doc["text"] = draw(any_text)
    if draw(st.integers(0, 19)) == 0:
        doc[draw(st.sampled_from(["bcc_list", "body", "attachment", "", "from_address"]))] = ["x@example.com"]
    if draw(st.integers(0, 19)) == 0:
        del doc[draw(st.sampled_from(sorted(doc)))]  # a missing key
    return doc


def _split_mailbox(value: str) -> tuple[str | None, str]:
    """email_internal_split_mailbox: `Name <address>` into the name and the address."""
    if value.endswith(">") and "<" in value:
        address = value[:-1].rsplit("<", 1)[1]
        return value[: len(value) - len(address) - 2].strip(" "), address
    return None, value


def _mailbox_ok(value: Any) -> bool:
    """email_internal_check_text 'mailbox', restated."""
    if not isinstance(value, str) or _breaks_text_rule(value):
        return False
    name, address = _split_mailbox(value)
    if name is not None:
        if len(name) >= 2 and name[0] == name[-1] == '"':
            name = name[1:-1]
        elif "," in name or ";" in name:
            return False
        if len(name) > 256 or any(c in name for c in '<>"\\@'):
            return False
    return not _not_one_address(address)


def _non_ascii_local_part(address: str) -> bool:
    """email_internal_check_local_part, restated: a recipient's local part must be ASCII."""
    return not address.rpartition("@")[0].isascii()


def _first_address(doc: dict[str, Any]) -> str | None:
    for key in ("to", "cc", "bcc"):
        if doc.get(key):
            return _split_mailbox(doc[key][0])[1]
    return None


def _attachment_ok(item: Any) -> bool:
    if not isinstance(item, dict) or set(item) - {"filename", "content_type", "content_base64", "disposition",
                                                  "content_id"}:  # fmt: skip
        return False
    name, media, content = item.get("filename"), item.get("content_type"), item.get("content_base64")
    if not isinstance(name, str) or not 1 <= len(name) <= 255 or "/" in name or "\\" in name:
        return False
    if name in (".", "..") or _breaks_text_rule(name):
        return False
    if not isinstance(media, str) or len(media) > 78 or not MEDIA_TYPE.fullmatch(media):
        return False
    if item.get("disposition") not in (None, "attachment", "inline"):
        return False
    content_id = item.get("content_id")
    if content_id is not None and not (isinstance(content_id, str) and CONTENT_ID.fullmatch(content_id)):
        return False
    return _decoded(content) is not None


def _decoded(content: Any) -> bytes | None:
    if not isinstance(content, str):
        return None
    try:
        return base64.b64decode("".join(content.split(" ")).replace("\n", ""), validate=True)
    except ValueError:
        return None


def _send_after_utc(value: str) -> datetime | None:
    if not SEND_AFTER.fullmatch(value) or (value[-1] != "Z" and int(value[-2:]) > 59):
        return None  # Python would take +05:75 as 6 h 15 min; the server refuses it
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when.astimezone(UTC).replace(tzinfo=None)


def _must_refuse(doc: dict[str, Any]) -> bool:
    """True when some rule of docs/procedures.md's member table refuses `doc`."""
    if set(doc) - set(MESSAGE_MEMBERS):
        return True
    recipients = 0
    for key in ("to", "cc", "bcc", "reply_to"):
        items = doc.get(key)
        if items is None:
            continue
        if not isinstance(items, list) or len(items) > 50 or not all(map(_mailbox_ok, items)):
            return True
        if any(_non_ascii_local_part(_split_mailbox(item)[1]) for item in items):
            return True
        recipients += len(items) if key != "reply_to" else 0
    if not 1 <= recipients <= 50:
        return True
    sender = doc.get("from")
    allowed = _mailbox_ok(sender) and _split_mailbox(sender)[1].partition("@")[2] == "example.com"
    if sender is not None and not allowed:
        return True
    if any(doc.get(k) is not None and not isinstance(doc[k], str) for k in ("subject", "text", "html")):
        return True
    template = doc.get("template")
    if template is not None:
        if not isinstance(template, dict) or set(template) - {"name", "data"}:
            return True
        name = template.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            return True
        if "data" in template and not isinstance(template["data"], dict):
            return True
        if any(doc.get(k) is not None for k in ("subject", "text", "html")):
            return True
    else:
        subject = doc.get("subject")
        if subject is None or len(subject) > 998 or _breaks_text_rule(subject):
            return True
        if doc.get("text") is None and doc.get("html") is None:
            return True
    headers = doc.get("headers")
    if headers is not None:
        if not isinstance(headers, dict) or len(headers) > 50:
            return True
        for name, value in headers.items():
            lower = name.lower()
            if not HEADER_NAME.fullmatch(name) or lower in RESERVED_HEADERS:
                return True
            if lower.startswith(("content-", "x-ses-", "resent-", "arc-", "dkim-")):
                return True
            if not isinstance(value, str) or len(value) > 998 or _breaks_text_rule(value):
                return True
    tags = doc.get("tags")
    if tags is not None:
        if not isinstance(tags, dict) or len(tags) > 49:
            return True
        for name, value in tags.items():
            if not NAME_TOKEN.fullmatch(name) or name.lower() == "outbox_id":
                return True
            if not isinstance(value, str) or not NAME_TOKEN.fullmatch(value):
                return True
    configuration_set = doc.get("configuration_set")
    if configuration_set is not None and configuration_set != LOCAL_CONFIGURATION_SET:
        return True  # malformed, or not on the operators' list
    attempts = doc.get("max_attempts")
    if attempts is not None and (type(attempts) is not int or not 1 <= attempts <= 100):
        return True
    now = datetime.now(UTC).replace(tzinfo=None)
    starts = now
    if doc.get("send_after") is not None:
        when = _send_after_utc(doc["send_after"]) if isinstance(doc["send_after"], str) else None
        if when is None or not now - timedelta(days=30) < when < now + timedelta(days=366):
            return True
        starts = when
    priority = doc.get("priority")
    if priority is not None and (type(priority) is not int or not 0 <= priority <= 9):
        return True
    if doc.get("expires_at") is not None:
        expires = _send_after_utc(doc["expires_at"]) if isinstance(doc["expires_at"], str) else None
        if expires is None or expires <= starts:
            return True
    attachments = doc.get("attachments")
    if attachments is not None:
        if not isinstance(attachments, list) or len(attachments) > 100:
            return True
        if not all(map(_attachment_ok, attachments)):
            return True
    return False


def _stored_message(repo: OutboxRepository, attempt_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cursor = repo.connection.cursor(dictionary=True)
    cursor.execute(
        "SELECT to_address, from_address, subject, text_body, html_body, max_attempts, next_attempt_at,"
        " message_options, attachment_bytes, priority, expires_at FROM email_delivery_attempts WHERE id = %s",
        (attempt_id,),
    )
    row: dict[str, Any] = cursor.fetchone()
    cursor.execute(
        "SELECT position, filename, content_type, disposition, content_id, content FROM email_attachments"
        " WHERE attempt_id = %s ORDER BY position",
        (attempt_id,),
    )
    attachments: list[dict[str, Any]] = [{**a, "content": bytes(a["content"])} for a in cursor.fetchall()]
    cursor.close()
    return row, attachments


@pytest.mark.slow
def test_enqueue_message_fuzz_stores_exactly_or_refuses_with_45000(
    server: TestServer, dsn: DatabaseDsn
) -> None:
    server.truncate(dsn)
    repo = OutboxRepository.open(dsn)
    counter = itertools.count()
    tallies = {"stored": 0, "refused": 0}

    def counts() -> tuple[int, int, int]:
        return tuple(
            _count(repo, t) for t in ("email_delivery_attempts", "email_delivery_events", "email_attachments")
        )  # type: ignore[return-value]

    @settings(max_examples=800, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])  # fmt: skip
    @given(
        escaped=st.booleans(),  # \\u escapes (4-byte characters as surrogate pairs) or raw UTF-8
        document=st.one_of(
            message_documents(),
            st.sampled_from(
                ["not json", "[1, 2]", "null", "1", '"to"', "{", "", '{"to": ["a@example.com"],}']
            ),
        ),
    )
    def check(escaped: bool, document: dict[str, Any] | str) -> None:
        nid = f"m-{next(counter)}"
        text = document if isinstance(document, str) else json.dumps(document, ensure_ascii=escaped)
        must_refuse = isinstance(document, str) or _must_refuse(document)
        before = counts()
        try:
            result = repo.enqueue_message(nid, text)
        except InvalidInput as exc:
            assert str(exc).startswith("email_enqueue_message: "), f"not a clean 45000: {exc}"
            assert counts() == before, "a refused message wrote nothing"
            assert must_refuse, f"a valid document was refused: {exc}"
            tallies["refused"] += 1
            return
        assert not must_refuse, "a document breaking a rule was accepted"
        assert isinstance(document, dict) and result.affected == 1
        row, attachments = _stored_message(repo, result.attempt_id)
        sent_from = document.get("from")
        assert row["to_address"] == _first_address(document)
        assert row["from_address"] == (_split_mailbox(sent_from)[1] if sent_from is not None else None)
        assert row["subject"] == ("" if document.get("template") is not None else document["subject"])
        assert (row["text_body"], row["html_body"]) == (document.get("text"), document.get("html"))
        assert row["max_attempts"] == (document.get("max_attempts") or 5)
        if document.get("send_after") is not None:
            assert row["next_attempt_at"] == _send_after_utc(document["send_after"])
        assert row["priority"] == (5 if document.get("priority") is None else document["priority"])
        expires_at = document.get("expires_at")
        assert row["expires_at"] == (None if expires_at is None else _send_after_utc(expires_at)), (
            "stored in UTC"
        )
        options = json.loads(row["message_options"])
        sent = document.get("attachments") or []
        # A null member means none and is not stored.
        expected = {k: v for k, v in document.items() if v is not None
                    and k not in ("subject", "text", "html", "attachments", "max_attempts", "send_after",
                                  "priority", "expires_at")}  # fmt: skip
        assert options == {**expected, "attachment_count": len(sent)}, "message_options as sent"
        assert attachments == [
            {
                "position": i,
                "filename": a["filename"],
                "content_type": a["content_type"].lower(),
                "disposition": a.get("disposition") or "attachment",
                "content_id": a.get("content_id"),
                "content": _decoded(a["content_base64"]),
            }
            for i, a in enumerate(sent)
        ], "every attachment byte"
        assert row["attachment_bytes"] == sum(len(a["content"]) for a in attachments)
        assert counts() == (before[0] + 1, before[1] + 1, before[2] + len(sent))
        tallies["stored"] += 1

    try:
        check()
    finally:
        repo.close()
    print(f"enqueue_message fuzz: {tallies['stored']} stored, {tallies['refused']} refused")
    assert tallies["stored"] >= 20 and tallies["refused"] >= 100, tallies


KNOWN_BUGS = [
    pytest.param(
        {"headers": {"X-\u212a": "v"}}, "refused", id="header name with KELVIN SIGN passes [!-9;-~]"
    ),
    pytest.param({"tags": {"\u017f": "v"}}, "refused", id="tag name with LONG S passes [A-Za-z]"),
    pytest.param({"configuration_set": "\u212a"}, "refused", id="configuration_set with KELVIN SIGN"),
    pytest.param(
        {
            "attachments": [
                {"filename": "a", "content_type": "a/b", "content_base64": "eA==", "content_id": "\u212a@x"}
            ]
        },
        "refused",
        id="content_id with KELVIN SIGN fails with 1366, not 45000",
    ),
    pytest.param({"headers": {"X" * 57: "v"}}, "stored", id="a 57-character header name fails with 1406"),
    pytest.param({"headers": {"-X": "v"}}, "stored", id="a header name starting with - fails with 4042"),
    pytest.param({"tags": {"-": "v"}}, "stored", id="a tag name starting with - fails with 4042"),
    pytest.param({"Cc": ["b@example.com"]}, "refused", id="Cc is taken as known and then ignored"),
    pytest.param(
        {"to ": ["b@example.com"]}, "refused", id="'to ' (PAD SPACE) is taken as known and then ignored"
    ),
    pytest.param(
        '{"to": ["a@example.com"], "to": ["x@example.com\\r\\nBcc: y@example.com"], "subject": "s", "text": "t"}',
        "refused",
        id="a second to is stored unchecked",
    ),
    pytest.param(
        '{"to": ["a@example.com"], "subject": "s", "text": "t", "headers": {"X-A": "a", "X-A": "b\\r\\nBcc: y@z"}}',
        "refused",
        id="a header name given twice",
    ),
    pytest.param(
        {"headers": {"X-A": "a", "x-a": "b"}}, "refused", id="a header name given twice in other case"
    ),
    pytest.param(
        '{"to": ["a@example.com"], "subject": "s", "text": "t", "tags": {"t": "a", "t": "b"}}',
        "refused",
        id="a tag name given twice",
    ),
    pytest.param({"attachments": None}, "attachment_count 0", id="attachments null counts 1"),
    pytest.param(
        {"template": None}, "stored", id="template null is refused where every other null means none"
    ),
    pytest.param(
        '{"to": ["a@example.com"], "subject": "s", "text": "t", "headers": {"X-A\\u0026B": "v"}}',
        "stored",
        id="a header name written with a JSON escape (Go writes & so) is not found by its path",
    ),
]


@pytest.mark.parametrize(("extra", "expected"), KNOWN_BUGS)
def test_what_the_fuzzer_found_stays_fixed(
    repo: OutboxRepository, extra: dict[str, Any] | str, expected: str
) -> None:
    """Each document the fuzzer once found mishandled: refused with a 45000 or stored as checked."""
    document = {
        "to": ["a@example.com"],
        "subject": "s",
        "text": "t",
        **({} if isinstance(extra, str) else extra),
    }
    text = extra if isinstance(extra, str) else json.dumps(document, ensure_ascii=False)
    try:
        result = repo.enqueue_message("known-gap", text)
    except InvalidInput as exc:
        assert expected == "refused" and str(exc).startswith("email_enqueue_message: "), str(exc)
        return
    except OutboxError as exc:
        raise AssertionError(f"not a 45000: {exc}") from exc
    assert expected != "refused", "accepted"
    if expected.startswith("attachment_count"):
        (options,) = repo._select(
            "SELECT message_options FROM email_delivery_attempts WHERE id = %s", (result.attempt_id,)
        )
        assert json.loads(options["message_options"])["attachment_count"] == int(expected.split()[-1])


def test_send_after_offsets_that_are_not_quarter_hours_convert_exactly(repo: OutboxRepository) -> None:
    when = (datetime.now(UTC) + timedelta(days=2)).replace(microsecond=0)
    for n, minutes in enumerate((-717, -581)):  # -11:57, then -09:41
        local = when.astimezone(timezone(timedelta(minutes=minutes))).isoformat()
        document = {"to": ["a@example.com"], "subject": "s", "text": "t", "send_after": local}
        attempt_id = repo.enqueue_message(f"offset-{n}", json.dumps(document)).attempt_id
        assert repo.get_row(attempt_id).next_attempt_at == when.replace(tzinfo=None), local
