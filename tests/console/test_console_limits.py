"""The console's memory is bounded whatever a request or a row holds (issue 25, finding 6): a form's
body is counted as it arrives, not trusted from Content-Length, and the email page reads a bounded
prefix of each body, never a whole 16 MiB one."""

from __future__ import annotations

import base64
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from email_outbox.console.app import MAX_FORM_BYTES
from email_outbox.db.console_reads import MAX_BODY_CHARS
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from tests.support.console_support import PASSWORD, USER, ConsoleUnderTest, Served, make_console, unknown_row
from tests.support.helpers import scalar


@pytest.fixture
def served(dsn: DatabaseDsn, tmp_path: Path) -> Iterator[Served]:
    console: ConsoleUnderTest = make_console(dsn, tmp_path)
    with Served(console) as running:
        yield running
    console.close()


def _chunked_post_under_a_small_content_length(served: Served, path: str, token: str, total: int) -> str:
    """A POST whose headers say 100 bytes while a chunked body of `total` bytes follows; the status line."""
    host, port = served.url.removeprefix("http://").split(":")
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Basic {auth}\r\n"
        f"Origin: {served.url}\r\nSec-Fetch-Site: same-origin\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"a" * 65536
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(head.encode())
        sent = 0
        try:
            first = f"csrf_token={token}&reason=".encode()
            sock.sendall(b"%x\r\n%s\r\n" % (len(first), first))
            while sent < total:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the console stopped reading and closed: what is wanted
        return sock.recv(4096).decode("latin-1").split("\r\n", 1)[0]


def test_a_chunked_body_past_the_limit_is_refused_whatever_content_length_says(
    served: Served, repo: OutboxRepository
) -> None:
    attempt_id = unknown_row(repo)
    with httpx.Client(auth=(USER, PASSWORD), timeout=60) as client:
        page = client.get(f"{served.url}/emails/{attempt_id}")
        match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page.text)
        assert match is not None
    status = _chunked_post_under_a_small_content_length(
        served, f"/emails/{attempt_id}/requeue", match.group(1), 8 * MAX_FORM_BYTES
    )
    assert status == "HTTP/1.1 413 Request Entity Too Large", status
    assert (
        scalar(repo, "SELECT status FROM email_delivery_attempts WHERE id = %s", (attempt_id,))
        == "UnknownOutcome"
    )


def _bytes_sent(repo: OutboxRepository) -> int:
    cursor = repo.connection.cursor()
    cursor.execute("SHOW GLOBAL STATUS LIKE 'Bytes_sent'")
    row = cursor.fetchone()
    cursor.close()
    assert row is not None
    return int(row[1])  # type: ignore[arg-type]


def test_the_email_page_reads_a_bounded_prefix_of_each_body(served: Served, repo: OutboxRepository) -> None:
    body = "x" * (4 * 1024 * 1024)  # each body 4 MiB: the server's packet limit allows two
    attempt_id = repo.enqueue("huge", "a@example.com", "s", text_body=body, html_body=body).attempt_id
    with httpx.Client(auth=(USER, PASSWORD), timeout=120) as client:
        client.get(f"{served.url}/")  # logged in, connections warm
        before = _bytes_sent(repo)
        page = client.get(f"{served.url}/emails/{attempt_id}")
        sent = _bytes_sent(repo) - before
    assert page.status_code == 200 and "x" * 1000 in page.text
    assert sent < 3 * MAX_BODY_CHARS, f"the server sent the console {sent} bytes for one page"
