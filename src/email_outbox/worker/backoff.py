"""Retry delays: exponential from a base, capped, with full jitter (AWS Architecture Blog's "full jitter")."""

from __future__ import annotations

import math
import random


def backoff_ceiling(attempt: int, base_seconds: float, max_seconds: float) -> float:
    """The upper bound for the delay after the `attempt`-th failed attempt (1-based)."""
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    # Cap the exponent first: 2**attempt overflows float long before any sane attempt count.
    exponent = min(attempt - 1, 64)
    return min(max_seconds, base_seconds * math.pow(2, exponent))


def retry_delay_seconds(
    attempt: int, base_seconds: float, max_seconds: float, rng: random.Random | None = None
) -> int:
    """A delay drawn uniformly from [0, ceiling], rounded up to whole seconds for the procedure.

    Full jitter spreads replicas that failed together (an SES outage) over the whole window instead of
    having them retry in lock-step.
    """
    ceiling = backoff_ceiling(attempt, base_seconds, max_seconds)
    draw = (rng or random).uniform(0, ceiling)
    return min(math.ceil(draw), math.ceil(max_seconds))
