"""What every part of OutboxRepository builds on: the three ways it talks to the server, supplied by
OutboxRepository itself, so each group of calls can live in a module of its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from email_outbox.models import Status


class Calls:
    """A group of typed calls, mixed into OutboxRepository."""

    def _call(self, procedure: str, **arguments: Any) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _affected(self, procedure: str, **arguments: Any) -> int:
        raise NotImplementedError

    def _select(self, sql: str, args: Sequence[Any] = ()) -> list[dict[str, Any]]:
        raise NotImplementedError


def status_or_none(value: Any) -> Status | None:
    return None if value is None else Status(str(value))
