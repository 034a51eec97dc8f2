"""Enqueue from SQLAlchemy, inside the Session's (or Connection's) own transaction.

    from email_outbox import Message
    from email_outbox.sqlalchemy import enqueue_message

    with Session(engine) as session, session.begin():
        session.add(order)
        enqueue_message(session, f"order-{order.id}", Message(to=[order.email], subject="Thanks", text="..."))
    # committed together; a rollback enqueues nothing

The engine must be a MySQL/MariaDB one (mysql+pymysql, mysql+mysqldb, mysql+mysqlconnector). With an
async engine (mysql+aiomysql, mysql+asyncmy), `await enqueue_message_async(async_session, ...)`.
A refusal raises the outbox's own exception (email_outbox.errors, with its errno), never a
half-written row: the procedure undoes its own writes and the caller's transaction stays usable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession
from sqlalchemy.orm import Session

from email_outbox.errors import refusal_from_driver_error
from email_outbox.message import Message
from email_outbox.message import enqueue_message as enqueue_on_dbapi
from email_outbox.models import EnqueueResult

__all__ = ["enqueue_message", "enqueue_message_async"]


def enqueue_message(
    session_or_connection: Session | Connection,
    notification_id: str,
    message: Message | Mapping[str, Any],
) -> EnqueueResult:
    """Enqueue on the connection of the session's transaction (beginning it, as a statement would);
    commits nothing."""
    if isinstance(session_or_connection, Session):
        connection = session_or_connection.connection()
    else:
        connection = session_or_connection
        # What SQLAlchemy's autobegin does before a statement: without it, the CALL would run in a
        # transaction SQLAlchemy does not know of, and Connection.commit() would not commit it.
        if not connection.in_transaction():
            connection.begin()
    try:
        return enqueue_on_dbapi(connection.connection, notification_id, message)
    except Exception as exc:
        refusal = refusal_from_driver_error(exc)
        if refusal is None:
            raise
        raise refusal from exc


async def enqueue_message_async(
    session_or_connection: AsyncSession | AsyncConnection,
    notification_id: str,
    message: Message | Mapping[str, Any],
) -> EnqueueResult:
    """The same on an AsyncSession or AsyncConnection (an async MySQL driver such as aiomysql)."""
    if isinstance(session_or_connection, AsyncSession):
        connection = await session_or_connection.connection()
    else:
        connection = session_or_connection
    return await connection.run_sync(lambda sync: enqueue_message(sync, notification_id, message))
