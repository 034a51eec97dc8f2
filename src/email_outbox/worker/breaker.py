"""The provider breaker: while SES is failing broadly, stop sending, give held rows back without using
an attempt, probe at a bounded rate, and resume at the first probe that gets an answer.

The rule (docs/design.md, "Provider outages") has two parts. The run: the breaker opens when
`breaker_failures` transient failures (5xx, connection refused, DNS, a TLS certificate refused in the
handshake, a connect timeout: Outcome.TRANSIENT, every one a request SES never accepted) follow one
another on this replica with no accepted send and no definite refusal between them, among at least
`breaker_distinct_emails` different emails, all within `breaker_window_seconds`, and the provider does
not answer a health check either (SES's GetAccount, asked when the run is met, its answer trusted for
`breaker_window_seconds`). When GetAccount answers, the run is the emails' own (SES answers a 500 for
those messages every time, as it did for six emails in a review): it starts again, they use their
attempts at their own backoff and nothing else waits. One email that fails on its own while others go
through never opens it either. A replica without a health check (no GetAccount permission: it answers
AccessDenied, which reads as no answer) opens on the run alone, as before.

The breadth: GetAccount answering proves the account is reachable, not that SendEmail works. So beside
the run the replica keeps the distinct emails that failed transiently since its last accepted send,
definite refusal or the breaker closing, at any pace, and a GetAccount answer does not forget them: when
they reach `breaker_broad_emails` the breaker opens whatever GetAccount says. SendEmail failing for that
many different emails with not one going through is an outage of sending, not those emails' fault, and
an outage must not use their attempts. A few emails failing on their own (fewer than that many) still
use their attempts, as above, since every send that goes through starts the count again.

The state is shared in the database (email_breaker_* procedures): every replica reads it at most once a
second before it claims, so a replica that starts during an outage does not hammer SES either. While it
is open no replica claims; one replica at a time takes the probe (email_breaker_try_probe), claims one
row and sends it. An answer closes the breaker for all; a transient failure opens it again for
`breaker_probe_seconds` plus up to a third more as jitter.

What the breaker never does: turn a possible send into a retry. Only Outcome.TRANSIENT rows are given
back, and a TRANSIENT outcome is a request SES refused or never received. An ambiguous outcome stays
UnknownOutcome exactly as the action table says (email_outbox.worker.actions), breaker or not.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable

from email_outbox.errors import OutboxError
from email_outbox.models import BreakerState
from email_outbox.ses import PROVIDER
from email_outbox.ses.classify import Decision, Outcome
from email_outbox.worker.actions import Action, Step, release_unsent
from email_outbox.worker.claim import Claim
from email_outbox.worker.config import PROBE_DELAY_LIMIT_SECONDS, WorkerConfig
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.stats import WorkerStats

log = logging.getLogger("email_outbox.worker")

# How stale a replica's view of the shared state may be when it claims.
READ_EVERY_SECONDS = 1.0
# The share of the probe interval added as jitter, so replicas that saw the same failure do not probe
# in step.
PROBE_JITTER_SHARE = 1 / 3
# Answers that prove the provider is up: the breaker closes (throttling and account problems then take
# their own course in the action table).
ANSWERS = frozenset(
    {Outcome.ACCEPTED, Outcome.PERMANENT, Outcome.THROTTLED, Outcome.ACCOUNT_PROBLEM, Outcome.TENANT_PAUSED}
)
# Outcomes that end a run of transient failures: the provider answered this email in words.
RUN_ENDERS = frozenset({Outcome.ACCEPTED, Outcome.PERMANENT})
FAILING_BROADLY, PROBE_FAILED = "provider failing broadly", "probe failed"
FAILING_FOR_MANY = "SendEmail failing for many different emails, none accepted between"
HELD_REASON = "provider down: held until the breaker closes, no attempt used"
STATE_NUMBERS = {"closed": 0, "half_open": 1, "open": 2}


class Breaker:
    def __init__(
        self,
        config: WorkerConfig,
        database: DatabaseCalls,
        stats: WorkerStats,
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
        provider_answers: Callable[[], bool] | None = None,
    ) -> None:
        """`provider_answers` is the health check: True when SES answers a call that sends nothing
        (GetAccount). None: no check, the rule alone opens the breaker."""
        self._config = config
        self._provider_answers = provider_answers
        self._answered_at: float | None = None  # when the health check last answered
        self._database = database
        self._stats = stats
        self._rng = rng
        self._clock = clock
        self.enabled = config.breaker_failures > 0
        self._lock = threading.Lock()
        # The current run of transient failures: (when, email id), oldest first.
        self._run: deque[tuple[float, int]] = deque()
        # The breadth: the emails failed transiently since the last accepted send or definite refusal,
        # whatever GetAccount answered; never more than breaker_broad_emails are kept.
        self._failing_emails: set[int] = set()
        self._state = "closed"
        self._read_at = -READ_EVERY_SECONDS
        self._probe_due_at = 0.0  # when a probe may be asked for (open, or another's hold ended)
        self._holding_probe_until: float | None = None  # this replica holds the probe until then
        self._probe_email: int | None = None  # the email sent as the probe, in flight
        # The longest a probe can take: its claim, its send and its finalize.
        self._hold_seconds = int(config.longest_send_seconds + 2 * config.poll_interval) + 5

    # --- before claiming and sending ---------------------------------------------------------------
    def claim_limit(self, wanted: int) -> int:
        """How many rows this replica may claim now: `wanted` while the breaker is closed; 1 while it
        holds the probe and has no probe in flight; 0 otherwise."""
        if not self.enabled:
            return wanted
        self._refresh()
        with self._lock:
            if self._state == "closed":
                return wanted
            now = self._clock()
            if self._holding_probe_until is not None and now < self._holding_probe_until:
                return 0 if self._probe_email is not None else 1
            self._holding_probe_until = None
            if now < self._probe_due_at:
                return 0
        return 1 if self._take_probe() else 0

    def wait_seconds(self, longest: float) -> float:
        """How long the claim loop waits when it may claim nothing: until the next probe may be asked
        for, at most `longest`."""
        with self._lock:
            due = self._probe_due_at - self._clock()
        return min(max(due, 0.05), longest)

    def closed(self) -> bool:
        """This replica's view, without asking the database."""
        return not self.enabled or self._state == "closed"

    def may_send(self, claim: Claim) -> bool:
        """Just before the send: True while closed, or for the one probe of the replica holding it."""
        if not self.enabled:
            return True
        with self._lock:
            if self._state == "closed":
                return True
            holding = self._holding_probe_until is not None and self._clock() < self._holding_probe_until
            if holding and self._probe_email is None:
                self._probe_email = claim.id
                self._stats.add("breaker", "probes")
                log.info("probing the provider with one send", extra=claim.context())
                return True
        self._stats.add("breaker", "held")
        return False

    def held(self) -> Action:
        return release_unsent(HELD_REASON)

    # --- after a send --------------------------------------------------------------------------------
    def review(self, claim: Claim, decision: Decision, action: Action) -> Action:
        """The action to take for `claim` after its send ended in `decision` (the action table said
        `action`): the same action, except that a transient failure while the provider is down goes
        back without using an attempt. May open or close the shared breaker."""
        if not self.enabled:
            return action
        outcome = decision.outcome
        with self._lock:
            was_probe = self._probe_email == claim.id
            if was_probe:
                self._probe_email = None
                self._holding_probe_until = None
            now = self._clock()
            if outcome in RUN_ENDERS:
                self._run.clear()
                self._failing_emails.clear()
            elif outcome is Outcome.TRANSIENT:
                self._run.append((now, claim.id))
                while self._run and self._run[0][0] < now - self._config.breaker_window_seconds:
                    self._run.popleft()
                if len(self._failing_emails) < self._config.breaker_broad_emails:
                    self._failing_emails.add(claim.id)
            down = self._state != "closed"
            judged = outcome is Outcome.TRANSIENT and not down
            broad = judged and len(self._failing_emails) >= self._config.breaker_broad_emails
            tripped = judged and (broad or self._tripped())
        # A GetAccount answer clears the run, never the breadth: SendEmail can fail while it answers.
        if tripped and not broad and self._provider_is_up():
            tripped = False
        if outcome in ANSWERS and (down or was_probe):
            self._close(claim, decision)
        elif (outcome is Outcome.TRANSIENT or outcome is Outcome.AMBIGUOUS) and was_probe:
            self._open(decision, PROBE_FAILED)
        elif tripped:
            self._open(decision, FAILING_FOR_MANY if broad else FAILING_BROADLY)
        if outcome is Outcome.TRANSIENT and action.step is Step.RETRY and (down or tripped or was_probe):
            self._stats.add("breaker", "released")
            return release_unsent(f"{HELD_REASON} ({decision.error_code})")
        return action

    def _provider_is_up(self) -> bool:
        """Asked when the rule is met, outside the lock (a network call): whether SES answers a call
        that sends nothing. If it does, the run of failures is the emails' own and starts again (the
        breadth stays: see the module docstring)."""
        if self._provider_answers is None:
            return False
        now = self._clock()
        fresh = (
            self._answered_at is not None and now - self._answered_at < self._config.breaker_window_seconds
        )
        if not fresh:
            if not self._provider_answers():
                return False
            self._answered_at = now
        with self._lock:
            failures, emails = len(self._run), len({email for _, email in self._run})
            self._run.clear()
        self._stats.add("breaker", "own_failures")
        # They use their attempts and the breaker stays closed.
        log.warning(
            "transient SES failures while SES answers GetAccount: the failures are the emails' own",
            extra={"failures": failures, "emails": emails},
        )
        return True

    def _tripped(self) -> bool:
        """Called with the lock held: the run of the module docstring."""
        config = self._config
        emails = {email for _, email in self._run}
        return len(self._run) >= config.breaker_failures and len(emails) >= config.breaker_distinct_emails

    # --- the shared state ------------------------------------------------------------------------------
    def _refresh(self) -> None:
        if self._clock() - self._read_at < READ_EVERY_SECONDS:
            return
        try:
            state = self._database.call("email_breaker_state", lambda r: r.breaker_state(PROVIDER))
        except OutboxError as exc:
            # The claim that follows meets the same database and backs off; keep the last view.
            log.warning("provider breaker state not read", extra={"error": str(exc)})
            self._read_at = self._clock()
            return
        self._adopt(state)

    def _adopt(self, state: BreakerState) -> None:
        with self._lock:
            now = self._clock()
            self._read_at = now
            if state.state != self._state:
                extra = {"breaker": state.summary(), "changed_by": state.changed_by}
                if state.down:
                    log.warning("provider down (the shared breaker state): holding sends", extra=extra)
                else:
                    log.info("provider up (the shared breaker state): sending", extra=extra)
            self._state = state.state
            self._stats.breaker_state = state.state
            self._stats.breaker_down_since = state.since if state.down else None
            self._stats.breaker_last_error = state.last_error_code if state.down else None
            if state.down and state.probe_at is not None:
                self._probe_due_at = now + max(0.0, (state.probe_at - state.database_time).total_seconds())
            if not state.down:
                self._holding_probe_until = None

    def _take_probe(self) -> bool:
        try:
            taken = self._database.call(
                "email_breaker_try_probe",
                lambda r: r.breaker_try_probe(PROVIDER, self._config.worker_id, self._hold_seconds),
            )
        except OutboxError as exc:
            log.warning("could not ask for the probe", extra={"error": str(exc)})
            return False
        with self._lock:
            now = self._clock()
            if taken:
                self._state = "half_open"
                self._stats.breaker_state = "half_open"
                self._holding_probe_until = now + self._hold_seconds
            else:
                # Another replica holds it, or probe_at moved: read again before asking again.
                self._read_at = -READ_EVERY_SECONDS
                self._probe_due_at = now + READ_EVERY_SECONDS
        return bool(taken)

    def _open(self, decision: Decision, why: str) -> None:
        base = self._config.breaker_probe_seconds
        after = min(
            PROBE_DELAY_LIMIT_SECONDS, max(1, round(base * (1 + self._rng.uniform(0, PROBE_JITTER_SHARE))))
        )
        with self._lock:
            self._state = "open"
            self._stats.breaker_state = "open"
            self._probe_due_at = self._clock() + after
            self._holding_probe_until = None
        try:
            opened = self._database.call(
                "email_breaker_open",
                lambda r: r.breaker_open(
                    PROVIDER, self._config.worker_id, decision.error_code, decision.error_message, after
                ),
            )
        except OutboxError as exc:
            log.error("provider breaker open on this replica only", extra={"error": str(exc)})
            return
        if opened:
            self._stats.add("breaker", "probes_failed" if why == PROBE_FAILED else "opened")
            log.critical(
                "provider breaker open: sends held without using attempts",
                extra={
                    "why": why,
                    "next_probe_s": after,
                    "error_code": decision.error_code,
                    "error": decision.error_message,
                },
            )

    def _close(self, claim: Claim, decision: Decision) -> None:
        with self._lock:
            self._state = "closed"
            self._stats.breaker_state = "closed"
            self._stats.breaker_down_since = None
            self._holding_probe_until = None
            self._run.clear()
            self._failing_emails.clear()
        detail = f"email {claim.id}: {decision.outcome.value}"
        try:
            closed = self._database.call(
                "email_breaker_close", lambda r: r.breaker_close(PROVIDER, self._config.worker_id, detail)
            )
        except OutboxError as exc:
            log.error("provider breaker closed on this replica only", extra={"error": str(exc)})
            return
        if closed:
            self._stats.add("breaker", "closed")
            log.warning("provider answering again: breaker closed, sending resumes", extra=claim.context())


def breaker_state_number(state: str) -> int:
    """For the gauge: 0 closed, 1 half-open, 2 open."""
    return STATE_NUMBERS.get(state, 0)
