"""FirstUseGate: the first call runs alone; once it has ended, calls run side by side."""

from __future__ import annotations

import threading

import pytest

from email_outbox.db.first_use import FirstUseGate

WAIT = 10.0


def test_calls_arriving_during_the_first_wait_until_it_has_ended() -> None:
    gate = FirstUseGate()
    first_inside, release_first = threading.Event(), threading.Event()
    entered: list[str] = []

    def first() -> str:
        entered.append("first")
        first_inside.set()
        assert release_first.wait(WAIT)
        entered.append("first ended")
        return "first"

    runner = threading.Thread(target=gate.run, args=(first,))
    runner.start()
    assert first_inside.wait(WAIT)
    others = [
        threading.Thread(target=gate.run, args=(lambda n=n: entered.append(f"other {n}"),)) for n in range(4)
    ]
    for thread in others:
        thread.start()
    # Each of the others is blocked on the gate, not finished: nothing of theirs ran yet.
    for thread in others:
        thread.join(0.2)
    assert entered == ["first"], "a second call ran while the first was still setting up"
    release_first.set()
    runner.join(WAIT)
    for thread in others:
        thread.join(WAIT)
    assert entered[:2] == ["first", "first ended"]
    assert sorted(entered[2:]) == [f"other {n}" for n in range(4)]


def two_calls_run_at_once(gate: FirstUseGate) -> bool:
    """Each of two calls waits at a barrier for the other: both return only if they ran side by side."""
    both_inside = threading.Barrier(2, timeout=WAIT)
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(gate.run(both_inside.wait))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    return len(results) == 2


def test_after_the_first_call_calls_run_side_by_side() -> None:
    gate = FirstUseGate()
    assert gate.run(lambda: 1) == 1
    assert two_calls_run_at_once(gate), "two calls after the first did not run at the same time"


def test_a_first_call_that_raises_still_opens_the_gate() -> None:
    gate = FirstUseGate()

    def refused() -> None:
        raise ConnectionRefusedError("no server yet")

    with pytest.raises(ConnectionRefusedError):
        gate.run(refused)
    assert two_calls_run_at_once(gate)
