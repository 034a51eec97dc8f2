"""The feed of what happened to the calling account's emails (email_changes, docs/procedures.md).

    from email_outbox.changes import changes

    cursor = load_my_cursor()                       # 0 the first time
    for change in changes(connection, after_cursor=cursor, follow=True):
        if change.event_type == "Bounce" and change.kind == "Permanent":
            mark_address_bad(change.recipient)
        save_my_cursor(change.cursor)               # resume from here: nothing missed, nothing twice

Any DB-API connection that takes %s parameters, in autocommit mode: a call in autocommit gives feed
positions to the changes committed since the last call (inside an open transaction it only reads what
already has one, so `follow` would see nothing new).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from email_outbox.errors import refusal_from_driver_error

MAX_ROWS = 1000


@dataclass(frozen=True)
class Change:
    cursor: int
    attempt_id: int
    notification_id: str
    change: str  # "status" or "provider"
    occurred_at: datetime
    from_status: str | None  # a status change: from (None for the enqueue) and to
    to_status: str | None
    event_type: str | None  # a provider event: Send, Delivery, Bounce, Complaint, DeliveryDelay, ...
    recipient: str | None
    kind: str | None  # a bounce's or complaint's type, a delay's type
    subkind: str | None
    detail: str | None

    def document(self) -> dict[str, Any]:
        """As JSON-ready values (the `changes` command prints one per line)."""
        doc = dict(self.__dict__)
        doc["occurred_at"] = self.occurred_at.isoformat()
        return {k: v for k, v in doc.items() if v is not None}


@dataclass(frozen=True)
class ChangesPage:
    changes: list[Change]
    next_cursor: int
    more: bool  # call again at once: more changes may be waiting


def read_changes(connection: Any, after_cursor: int = 0, max_rows: int = 100) -> ChangesPage:
    """One CALL email_changes. A refusal (a bad cursor, max_rows out of 1 to 1000) raises
    email_outbox.errors.InvalidArgument."""
    cursor = connection.cursor()
    try:
        try:
            cursor.execute("CALL email_changes(%s, %s)", (after_cursor, max_rows))
        except Exception as exc:
            refusal = refusal_from_driver_error(exc)
            if refusal is None:
                raise
            raise refusal from exc
        results = [list(cursor.fetchall())]
        while cursor.nextset():
            if cursor.description:
                results.append(list(cursor.fetchall()))
    finally:
        cursor.close()
    rows, (summary,) = results[0], results[1]
    return ChangesPage([_change(row) for row in rows], int(summary[0]), bool(summary[1]))


def _change(row: Sequence[Any]) -> Change:
    texts = [_text(value) for value in row]
    return Change(
        cursor=int(row[0]),
        attempt_id=int(row[1]),
        notification_id=str(texts[2]),
        change=str(texts[3]),
        occurred_at=row[4],
        from_status=texts[5],
        to_status=texts[6],
        event_type=texts[7],
        recipient=texts[8],
        kind=texts[9],
        subkind=texts[10],
        detail=texts[11],
    )


def changes(
    connection: Any,
    after_cursor: int = 0,
    max_rows: int = 100,
    *,
    follow: bool = False,
    poll_interval: float = 1.0,
    stop: Callable[[], bool] = lambda: False,
) -> Iterator[Change]:
    """Every change after `after_cursor`, in order. Without `follow` it ends when it has caught up;
    with it, it waits `poll_interval` seconds between empty reads until `stop()` is true."""
    cursor = after_cursor
    while not stop():
        page = read_changes(connection, cursor, max_rows)
        yield from page.changes
        cursor = page.next_cursor
        if page.more:
            continue
        if not follow:
            return
        time.sleep(poll_interval)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)
