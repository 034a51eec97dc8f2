"""What the command line and the console share about an operator's actions: how a duration is
written (90s, 15m, 2h, 7d, 1w) and the warning a requeue shows."""

from __future__ import annotations

import re

from email_outbox.errors import InvalidInput

REQUEUE_WARNING = (
    "warning: a requeued email may reach the recipient twice if SES accepted the earlier attempt;"
    " check SES first (docs/operations.md)"
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def is_duration(text: str) -> bool:
    return _DURATION.match(text) is not None


def parse_duration(text: str) -> float:
    """'90s', '15m', '2h', '7d', '1w', or plain seconds."""
    match = _DURATION.match(text)
    if not match:
        raise InvalidInput(f"not a duration: {text!r} (use e.g. 90s, 15m, 2h, 7d)")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"]
