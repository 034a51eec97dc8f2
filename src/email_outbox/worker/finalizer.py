"""The only code that calls the finalize and release procedures.

Each call is fenced by the claim token in SQL: it changes the row only while this replica still holds
the claim, and returns the affected-row count. The finalizer retries under the one policy of
`DatabaseCalls`, until the end of the lease, and says what happened when it gives up: the row stays
Processing and the lease sweep moves it to UnknownOutcome (it may have been sent), or, for a release,
back to where it was claimed from at the next claim (it was not sent).

Finalizes share one connection (the group commit's), so a row another session keeps locked must not
hold it: a call there that meets a lock (1205, raised at once on that connection) is landed part by
part, and a part that meets the lock again goes back to its own slot, which retries it on a short-lived
connection of its own until its lease ends while the other slots' finalizes keep landing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from email_outbox import failpoints
from email_outbox.db.connection import ER_LOCK_WAIT_TIMEOUT
from email_outbox.db.repository import OutboxRepository, finalize_alone
from email_outbox.errors import InvalidInput, OutboxError, TransientDatabaseError
from email_outbox.models import FinalizeItem
from email_outbox.worker.actions import START, Action, Step, release_unsent
from email_outbox.worker.claim import Claim
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.group_commit import GroupCommit
from email_outbox.worker.stats import WorkerStats

log = logging.getLogger("email_outbox.worker")


@dataclass(frozen=True)
class Landing:
    """What became of one finalize: the affected-row count, or the error that stopped it, and whether
    the connection was lost on the way (an earlier try may then have committed)."""

    affected: int = 0
    error: OutboxError | None = None
    reconnected: bool = False

    @property
    def met_lock(self) -> bool:
        """Another session held the row: the call waited its few seconds and changed nothing."""
        return isinstance(self.error, TransientDatabaseError) and self.error.errno == ER_LOCK_WAIT_TIMEOUT


# How long a finalize may wait for the other rows in the send slots while sends are fast: the rows of
# one claim end within a few ms of each other, so their finalizes land as one group, one commit
# (docs/performance.md, "The worker's timing constants").
COMPANY_SECONDS = 0.005

# What one slot tells the database at once: a claim and the action for it, then optionally the start
# of the reservation it sends next.
Report = tuple[tuple[Claim, Action], ...]


class Finalizer:
    def __init__(
        self, database: DatabaseCalls, stats: WorkerStats, in_flight: Callable[[], int] = lambda: 0
    ) -> None:
        """`in_flight`: the rows this replica holds in its send slots, each of which ends in a finalize."""
        self._database = database
        self._stats = stats
        self._in_flight = in_flight
        self._group: GroupCommit[Report, tuple[Landing, ...]] = GroupCommit(
            self._land_reports, company=self._company
        )

    def _company(self) -> tuple[int, float]:
        """While sends are fast, a finalize waits up to COMPANY_SECONDS for the other rows in the send
        slots to end too, so they land in one call; while they are slow, never."""
        if self._stats.sends_are_slow():
            return 0, 0.0
        return self._in_flight(), COMPANY_SECONDS

    def apply(self, claim: Claim, action: Action) -> bool:
        """Tell the database what became of the claimed row; True if the change landed."""
        return self.apply_and_start(claim, action, None)[0]

    def apply_and_start(self, claim: Claim, action: Action, following: Claim | None) -> tuple[bool, bool]:
        """`apply`, and in the same call the start mark of `following`, the reservation this slot sends
        next: (the change landed, `following` may be sent now)."""
        if action.step is not Step.RELEASE:
            failpoints.hit("before_finalize")
            failpoints.hit_soon("during_finalize")
        report = ((claim, action),) if following is None else ((claim, action), (following, START))
        landings: Sequence[Landing] = self._group.submit(report)
        if following is not None and landings[0].met_lock:
            # The slot waits for its locked row: the reservation it would send next goes back (fenced;
            # its start, landed or not, was not sent), so that row waits for no lock either.
            self.release_all([following], "its slot waits for a locked row")
            return self._report(claim, action, self._land_apart(report[0], landings[0])), False
        landings = self._apart_if_locked(report, landings)
        landed = self._report(claim, action, landings[0])
        if following is None:
            return landed, False
        started = landings[1].error is None and landings[1].affected == 1
        if started:
            self._stats.add("finalize", Step.START.value)
        else:
            self._stats.add("finalize", "start_refused")
            log.warning(
                "a reservation could not be started (claim no longer held or lease over): not sent",
                extra={**following.context(), "error": str(landings[1].error or "")},
            )
            # A start that failed, or was refused after a reconnect, may still have landed: give the row
            # back (fenced; a no-op if it is no longer held) instead of leaving a started row that was
            # never sent for the sweep to make UnknownOutcome.
            self.release_all([following], "start not confirmed")
        return landed, started

    def release_all(self, claims: Sequence[Claim], reason: str) -> None:
        """Give back reservations that will not be sent, in one call."""
        if claims:
            report = tuple((c, release_unsent(reason)) for c in claims)
            for (claim, action), landing in zip(
                report, self._apart_if_locked(report, self._group.submit(report)), strict=True
            ):
                self._report(claim, action, landing)

    def _apart_if_locked(self, report: Report, landings: Sequence[Landing]) -> Sequence[Landing]:
        """Called by the slot that owns `report`, after the group commit let go of the shared connection:
        each part that met a row lock there is retried apart."""
        return [
            self._land_apart(part, landing) if landing.met_lock else landing
            for part, landing in zip(report, landings, strict=True)
        ]

    def _land_apart(self, part: tuple[Claim, Action], locked: Landing) -> Landing:
        """One part on a short-lived connection of its own, where a lock wait is retried until its
        lease ends: the row waits for the session that holds it, no other finalize does."""
        claim, action = part
        log.warning(
            "a finalize met another session's row lock; retrying it on a connection of its own",
            extra={**claim.context(), "step": action.step.value, "error": str(locked.error)},
        )
        item = _item(claim, action)
        apart = self._database.apart()
        try:
            landing = _call(
                apart, f"finalize_{action.step.value}", lambda r: finalize_alone(r, item), claim.deadline
            )
        finally:
            apart.drop()
        return replace(landing, reconnected=landing.reconnected or locked.reconnected)

    def _report(self, claim: Claim, action: Action, landing: Landing) -> bool:
        ctx = {**claim.context(), "claim_token": claim.token, "step": action.step.value}
        if action.step is Step.SENT:
            ctx["message_id"] = action.message_id
        elif action.step is Step.RELEASE:
            ctx.update(reason=action.reason, delay_s=action.delay_seconds)
        if landing.error is not None:
            self._stats.add("finalize", f"{action.step.value}_never_landed")
            fate = "it was not sent" if action.step is Step.RELEASE else "it may have been sent"
            log.error(
                f"finalize never landed; the row goes UnknownOutcome when its lease ends ({fate})",
                extra={**ctx, "error": str(landing.error)},
            )
            return False
        if landing.affected == 1:
            self._stats.add("finalize", action.step.value)
            log.debug(action.step.value, extra=ctx)
            return True
        if landing.reconnected:
            # The connection dropped during an earlier try, which may have committed: a refusal now
            # can be our own finalize already in place.
            self._stats.add("finalize", f"{action.step.value}_refused_after_reconnect")
            log.warning("finalize refused after a reconnect; the earlier try may have landed", extra=ctx)
        else:
            self._stats.add("finalize", "stale_claimant")
            log.error(
                "finalize refused: this worker no longer holds the claim (lease swept or taken over);"
                " not retried",
                extra=ctx,
            )
        return False

    def _land_reports(self, reports: Sequence[Report]) -> list[tuple[Landing, ...]]:
        """The reports of several slots in one call; each gets its own parts' landings back."""
        parts = [part for report in reports for part in report]
        self._stats.record_finalize_group(len(parts))
        landings = self._land(parts)
        if len(landings) != len(parts):
            landings = _unconfirmed(parts, landings)
        answers = iter(landings)
        return [tuple(next(answers) for _ in report) for report in reports]

    def _land(self, group: Sequence[tuple[Claim, Action]]) -> list[Landing]:
        """One call for the group: the row's own procedure when it is alone, email_finalize_and_start
        for one slot's finalize and next start (a slow send's path: cheaper on the server than the
        batch, which reads JSON), email_finalize_batch otherwise; under the retry policy until the earliest lease
        in the group ends."""
        if len(group) == 1:
            claim, action = group[0]
            item = _item(claim, action)
            return [
                _call(
                    self._database,
                    f"finalize_{action.step.value}",
                    lambda r: finalize_alone(r, item),
                    claim.deadline,
                )
            ]
        if len(group) == 2 and group[0][1].step is not Step.START and group[1][1].step is Step.START:
            return self._land_with_start(group[0], group[1][0])
        items = [_item(claim, action) for claim, action in group]
        losses: list[str] = []
        try:
            results = self._database.call(
                "finalize_batch",
                lambda r: r.finalize_batch(items),
                deadline=min(claim.deadline for claim, _ in group),
                losses=losses,
            )
        except InvalidInput:
            # Not expected from items built here; land each alone so one cannot sink the others.
            return self._each_alone(group, reconnected=False)
        except OutboxError as exc:
            if Landing(error=exc).met_lock:  # which row is locked is unknown: each alone finds out
                return self._each_alone(group, reconnected=bool(losses))
            return [Landing(error=exc, reconnected=bool(losses))] * len(group)
        return [Landing(r.affected, reconnected=bool(losses)) for r in results]

    def _land_with_start(self, finalize: tuple[Claim, Action], following: Claim) -> list[Landing]:
        claim, action = finalize
        losses: list[str] = []
        try:
            result, started = self._database.call(
                "finalize_and_start",
                lambda r: r.finalize_and_start(_item(claim, action), following.id, following.token),
                deadline=min(claim.deadline, following.deadline),
                losses=losses,
            )
        except InvalidInput:
            # Not expected from arguments built here; land each alone so one cannot sink the other.
            return self._each_alone([finalize, (following, START)], reconnected=False)
        except OutboxError as exc:
            if Landing(error=exc).met_lock:
                return self._each_alone([finalize, (following, START)], reconnected=bool(losses))
            return [Landing(error=exc, reconnected=bool(losses))] * 2
        return [
            Landing(result.affected, reconnected=bool(losses)),
            Landing(int(started), reconnected=bool(losses)),
        ]

    def _each_alone(self, group: Sequence[tuple[Claim, Action]], *, reconnected: bool) -> list[Landing]:
        """Each part in its own call; `reconnected`: the group's call lost its connection on the way, so
        an earlier try of it may have landed every part."""
        landings = [self._land([part])[0] for part in group]
        return [replace(landing, reconnected=landing.reconnected or reconnected) for landing in landings]


def _call(
    database: DatabaseCalls, what: str, procedure: Callable[[OutboxRepository], int], deadline: float
) -> Landing:
    losses: list[str] = []
    try:
        affected = database.call(what, procedure, deadline=deadline, losses=losses)
    except OutboxError as exc:
        return Landing(error=exc, reconnected=bool(losses))
    return Landing(affected, reconnected=bool(losses))


def _unconfirmed(parts: Sequence[tuple[Claim, Action]], landings: Sequence[Landing]) -> list[Landing]:
    """A call that answered a different number of rows than it was given items (a broken contract):
    which answer is whose is unknown, so none is trusted. Each part is reported as never landed: a
    start is not sent (its reservation is given back, fenced), a finalize is not retried and, if it
    did not land, the lease sweep makes the row UnknownOutcome; nothing is sent twice."""
    error = OutboxError(
        f"the database answered {len(landings)} rows for {len(parts)} items: no landing confirmed"
    )
    log.error(
        f"a finalize call answered {len(landings)} rows for {len(parts)} items; treating each as not landed",
        extra={"items": len(parts), "rows": len(landings), "ids": [claim.id for claim, _ in parts]},
    )
    reconnected = any(landing.reconnected for landing in landings)
    return [Landing(error=error, reconnected=reconnected)] * len(parts)


def _item(claim: Claim, action: Action) -> FinalizeItem:
    """The row's finalize (or start) as one item: for email_finalize_batch, email_finalize_and_start,
    or alone through its single procedure (finalize_alone)."""
    return FinalizeItem(
        id=claim.id,
        claim_token=claim.token,
        outcome=action.step.value,
        provider_message_id=action.message_id if action.step is Step.SENT else None,
        error_code=action.error_code if action.step in (Step.FAILED, Step.RETRY) else None,
        error_message=action.error_message
        if action.step in (Step.FAILED, Step.RETRY, Step.UNKNOWN)
        else None,
        delay_seconds=action.delay_seconds if action.step in (Step.RETRY, Step.RELEASE) else 0,
    )
