"""email_outbox.sqlalchemy: the enqueue rides in the Session's (or Connection's) transaction on a real
server, through PyMySQL, mysqlclient and aiomysql: a commit keeps the row and the business change
together, a rollback leaves neither, and a refusal is the outbox's own exception."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from urllib.parse import quote

import pytest

sqlalchemy = pytest.importorskip("sqlalchemy", reason="SQLAlchemy is not installed (the test extra has it)")

from sqlalchemy import Engine, create_engine, text  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from email_outbox import Message  # noqa: E402
from email_outbox.db.dsn import DatabaseDsn  # noqa: E402
from email_outbox.db.repository import OutboxRepository  # noqa: E402
from email_outbox.errors import InvalidAddress  # noqa: E402
from email_outbox.sqlalchemy import enqueue_message, enqueue_message_async  # noqa: E402

MESSAGE = Message(to=["ann@example.com"], subject="Your order", text="Thanks.")


def url(dsn: DatabaseDsn, driver: str) -> str:
    where = f"?unix_socket={quote(dsn.unix_socket)}" if dsn.unix_socket else ""
    host = "localhost" if dsn.unix_socket else f"{dsn.host}:{dsn.port}"
    auth = quote(dsn.user, safe="") + (":" + quote(dsn.password, safe="") if dsn.password else "")
    return f"mysql+{driver}://{auth}@{host}/{dsn.database}{where}"


@pytest.fixture(params=["pymysql", "mysqldb"])
def engine(request: pytest.FixtureRequest, dsn: DatabaseDsn) -> Iterator[Engine]:
    if request.param == "mysqldb":
        pytest.importorskip("MySQLdb", reason="mysqlclient is not installed (it needs libmariadb-dev)")
    made = create_engine(url(dsn, request.param) + ("&" if dsn.unix_socket else "?") + "charset=utf8mb4")
    with made.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS shop_orders (id INT PRIMARY KEY)"))
        conn.execute(text("DELETE FROM shop_orders"))
    yield made
    made.dispose()


def notification_ids(repo: OutboxRepository) -> set[str]:
    return {
        str(r["notification_id"]) for r in repo._select("SELECT notification_id FROM email_delivery_attempts")
    }


def orders(engine: Engine) -> set[int]:
    with engine.connect() as conn:
        return {int(r[0]) for r in conn.execute(text("SELECT id FROM shop_orders"))}


def test_a_session_commit_keeps_the_order_and_the_email_and_a_rollback_neither(
    engine: Engine, repo: OutboxRepository
) -> None:
    with Session(engine) as session, session.begin():
        session.execute(text("INSERT INTO shop_orders VALUES (1)"))
        result = enqueue_message(session, "order-1", MESSAGE)
    assert result.affected == 1 and result.attempt_id is not None
    with Session(engine) as session:
        session.begin()
        session.execute(text("INSERT INTO shop_orders VALUES (2)"))
        enqueue_message(session, "order-2", MESSAGE)
        session.rollback()
    assert orders(engine) == {1}
    assert notification_ids(repo) == {"order-1"}


def test_a_connection_commit_sends_and_a_rollback_does_not(engine: Engine, repo: OutboxRepository) -> None:
    with engine.connect() as conn:
        # No statement before it: the enqueue itself must begin SQLAlchemy's transaction.
        enqueue_message(conn, "conn-1", MESSAGE)
        conn.execute(text("INSERT INTO shop_orders VALUES (3)"))
        conn.commit()
        enqueue_message(conn, "conn-2", {"to": ["bob@example.com"], "subject": "s", "text": "t"})
        conn.rollback()
    assert notification_ids(repo) == {"conn-1"}
    assert orders(engine) == {3}


def test_a_refusal_is_the_outboxs_exception_and_the_transaction_goes_on(
    engine: Engine, repo: OutboxRepository
) -> None:
    with Session(engine) as session, session.begin():
        session.execute(text("INSERT INTO shop_orders VALUES (4)"))
        with pytest.raises(InvalidAddress) as refused:
            enqueue_message(session, "bad-1", Message(to=["not an address"], subject="s", text="t"))
        assert refused.value.errno == 45003
        enqueue_message(session, "good-1", MESSAGE)
    assert notification_ids(repo) == {"good-1"}
    assert orders(engine) == {4}


def test_an_async_session_commits_and_rolls_back_with_aiomysql(
    dsn: DatabaseDsn, repo: OutboxRepository
) -> None:
    pytest.importorskip("aiomysql", reason="aiomysql is not installed (the test extra has it)")
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

    async def scenario() -> None:
        engine = create_async_engine(url(dsn, "aiomysql"))
        try:
            async with AsyncSession(engine) as session:
                async with session.begin():
                    await enqueue_message_async(session, "async-1", MESSAGE)
                async with session.begin():
                    await enqueue_message_async(session, "async-2", MESSAGE)
                    await session.rollback()
        finally:
            await engine.dispose()

    asyncio.run(scenario())
    assert notification_ids(repo) == {"async-1"}
