"""What the console's HTTP and browser tests share: an app on the test database, its users file, and
rows in each state (one of them a hostile email whose every text field carries a script payload)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from email_outbox.console.app import ConsoleSettings, create_app
from email_outbox.console.auth import Authenticator, BasicAuth
from email_outbox.console.pool import ConsoleDatabase
from email_outbox.console.users import UsersFile, add_user
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.message import Attachment, Message, enqueue_message
from tests.support.helpers import token

USER, PASSWORD = "alice", "correct horse battery"
# Every text field an attacker controls, each with a payload that would run if it were not escaped;
# each payload sets a mark on `window` that the browser test looks for.
XSS_NOTIFICATION_ID = "<script>window.__pwned_nid=1</script>nid"
XSS_SUBJECT = '"><img src=x onerror="window.__pwned_subject=1">subject'
XSS_TEXT = "</pre><script>window.__pwned_text=1</script>"
XSS_HTML = (
    "<h1 id=inner>Hello from the HTML body</h1><script>parent.__pwned_html=1;window.__pwned_html=1</script>"
    '<img src=x onerror="parent.__pwned_img=1"><img id=remote src="http://127.0.0.1:9/pixel.gif">'
)


@dataclass
class ConsoleUnderTest:
    app: Starlette
    settings: ConsoleSettings
    users_file: Path

    def close(self) -> None:
        self.settings.database.close()


def make_console(
    dsn: DatabaseDsn,
    tmp_path: Path,
    *,
    authenticator: Authenticator | None = None,
    bulk_cap: int = 500,
    read_only: bool = False,
) -> ConsoleUnderTest:
    users_file = tmp_path / "console-users"
    if not users_file.exists():
        add_user(users_file, USER, PASSWORD)
    database = ConsoleDatabase(dsn, statement_timeout_seconds=5)
    database.start()
    settings = ConsoleSettings(
        database=database,
        authenticator=authenticator or BasicAuth(UsersFile.load(users_file)),
        bulk_cap=bulk_cap,
        read_only=read_only,
    )
    return ConsoleUnderTest(create_app(settings), settings, users_file)


def unknown_row(repo: OutboxRepository, to: str = "user0@example.com", nid: str | None = None) -> int:
    result = repo.enqueue(nid or f"unk-{token()}", to, "an ambiguous send", text_body="hello")
    claim = token()
    assert repo.try_claim(result.attempt_id, claim, "worker-a", 60) == 1
    assert repo.finalize_unknown(result.attempt_id, claim, "read timeout after the request was sent") == 1
    return result.attempt_id


def sent_row(repo: OutboxRepository, nid: str | None = None) -> int:
    result = repo.enqueue(nid or f"sent-{token()}", "sent@example.com", "delivered", text_body="hi")
    claim = token()
    assert repo.try_claim(result.attempt_id, claim, "worker-b", 60) == 1
    assert repo.finalize_sent(result.attempt_id, claim, "ses-0100-abc") == 1
    return result.attempt_id


def hostile_row(repo: OutboxRepository) -> int:
    """An UnknownOutcome email whose notification id, subject and bodies hold script payloads."""
    result = repo.enqueue(
        XSS_NOTIFICATION_ID, "victim@example.com", XSS_SUBJECT, text_body=XSS_TEXT, html_body=XSS_HTML
    )
    claim = token()
    assert repo.try_claim(result.attempt_id, claim, "worker-x", 60) == 1
    assert repo.finalize_unknown(result.attempt_id, claim, "<b>read timeout</b>") == 1
    return result.attempt_id


def message_with_attachments(repo: OutboxRepository) -> int:
    message = Message(
        to=["ann@example.com"],
        subject="Invoice 42",
        text="The invoice is attached.",
        html="<p>The invoice is attached.</p>",
        attachments=[
            Attachment("invoice-42.pdf", "application/pdf", b"%PDF-1.4 fake"),
            Attachment(
                "logo.png", "image/png", b"\x89PNG..", disposition="inline", content_id="logo@example.com"
            ),
        ],
    )
    result = enqueue_message(repo.connection, f"inv-{token()}", message)
    return result.attempt_id


def wait_for(condition: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class Served:
    """The console on uvicorn in a thread, on a free loopback port."""

    def __init__(self, console: ConsoleUnderTest) -> None:
        self.console = console
        self.sock = free_socket()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        config = uvicorn.Config(console.app, log_level="warning", proxy_headers=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        wait_for(lambda: self.server.started, what="uvicorn to start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
