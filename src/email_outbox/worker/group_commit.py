"""Group commit: finalizes that arrive while another is on the wire go to the database together.

The first send slot to arrive with a finalize becomes the leader: it takes every finalize waiting (its
own among them), lands them in one call, hands each waiting slot its own result and steps down; a slot
that arrived meanwhile and still has no result leads the next call. An idle replica's finalize
leaves at once, alone, and a busy one's leave in groups, which costs the database one transaction, one
commit and (email_finalize_batch's set path) one UPDATE per group instead of one of each per email
(docs/performance.md).

Leaders never land at once, so the finalizer gives them one connection to share
(`DatabaseCalls.taking_turns`).

A slot waits for its group's leader without a timeout of its own: the leader's call is bounded by the
retry policy (the lease's end, and at a stop the grace), and a stopping worker waits for neither past
its stop bound (Worker._exit_at_bound).

A leader may wait a moment for company (`company`): while sends are fast, the rows of one claim end
within a few milliseconds of each other, and one call for all of them costs the database far less than
three or four calls for a few each. It never waits while sends are slow, where a slot waiting is a
send not made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

# At most this many finalizes in one call: one transaction stays short however many slots there are.
MAX_GROUP = 64


def alone() -> tuple[int, float]:
    """No company expected: the leader leaves at once."""
    return 0, 0.0


@dataclass
class _Ticket(Generic[Item, Result]):
    item: Item
    result: Result | None = None
    error: BaseException | None = None
    done: bool = False


class GroupCommit(Generic[Item, Result]):
    def __init__(
        self,
        land: Callable[[Sequence[Item]], Sequence[Result]],
        max_group: int = MAX_GROUP,
        company: Callable[[], tuple[int, float]] = alone,
    ) -> None:
        """`land` lands a group and returns one result per item, in order, or raises for all.
        `company` says, when a leader is chosen, how many items it may expect in all and how many
        seconds it may wait for them."""
        self._land = land
        self._company = company
        self._max_group = max_group
        self._changed = threading.Condition()
        self._waiting: list[_Ticket[Item, Result]] = []
        self._leading = False

    def submit(self, item: Item) -> Result:
        """`item`'s result; raises what landing its group raised."""
        ticket: _Ticket[Item, Result] = _Ticket(item)
        with self._changed:
            self._waiting.append(ticket)
            self._changed.notify_all()  # a leader waiting for company
        while True:
            with self._changed:
                while not ticket.done and self._leading:
                    self._changed.wait()
                if ticket.done:
                    break
                self._leading = True
                self._wait_for_company()
                group = self._waiting[: self._max_group]
                del self._waiting[: self._max_group]
            self._lead(group)
        if ticket.error is not None:
            raise ticket.error
        assert ticket.result is not None
        return ticket.result

    def _wait_for_company(self) -> None:
        """Called holding the lock: until `company`'s count is waiting or its time is over."""
        expected, seconds = self._company()
        expected = min(expected, self._max_group)
        deadline = time.monotonic() + seconds
        while len(self._waiting) < expected:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._changed.wait(remaining)

    def _lead(self, group: list[_Ticket[Item, Result]]) -> None:
        try:
            results = self._land([t.item for t in group])
            if len(results) != len(group):
                raise RuntimeError(f"landed {len(group)} items but got {len(results)} results")
            for ticket, result in zip(group, results, strict=True):
                ticket.result = result
        except BaseException as exc:  # every member of the group hears what happened to it
            for ticket in group:
                ticket.error = exc
        finally:
            with self._changed:
                for ticket in group:
                    ticket.done = True
                self._leading = False
                self._changed.notify_all()
