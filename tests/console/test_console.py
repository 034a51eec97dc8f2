"""The operator console over HTTP (Starlette's TestClient) against the real database: authentication,
every page, the audited actions, and the door's locks (CSRF, origin, escaping, headers, no traces,
bounded queries). The browser tests are in test_console_browser.py."""

from __future__ import annotations

import getpass
import hashlib
import hmac
import ipaddress
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mysql.connector
import pytest
from starlette.testclient import TestClient

from email_outbox.cli.console import build_settings, loopback_hosts
from email_outbox.cli.main import build_parser, main
from email_outbox.console.auth import BasicAuth, NoAuth, TrustedHeader
from email_outbox.console.login_limit import FailedLogins
from email_outbox.console.users import UsersFile, add_user, verify_password
from email_outbox.db.console_reads import ConsoleReads
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import AccessDenied
from tests.conftest import TestServer
from tests.contract.test_contract_outage import failed_row
from tests.support.accounts import granted_account
from tests.support.console_support import (
    PASSWORD,
    USER,
    XSS_HTML,
    XSS_NOTIFICATION_ID,
    XSS_SUBJECT,
    XSS_TEXT,
    ConsoleUnderTest,
    hostile_row,
    make_console,
    message_with_attachments,
    sent_row,
    unknown_row,
)
from tests.support.helpers import scalar

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "http://testserver"
SAME_ORIGIN = {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}


@pytest.fixture
def console(dsn: DatabaseDsn, tmp_path: Path) -> Iterator[ConsoleUnderTest]:
    made = make_console(dsn, tmp_path)
    yield made
    made.close()


@pytest.fixture
def client(console: ConsoleUnderTest) -> Iterator[TestClient]:
    with TestClient(console.app, follow_redirects=False) as c:
        c.auth = (USER, PASSWORD)
        yield c


def csrf(client: TestClient, path: str = "/") -> str:
    page = client.get(path)
    match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', page.text)
    if match:
        return match.group(1)
    # A page with no form: the token is the same for every page of this user.
    settings = client.app.state.settings  # type: ignore[attr-defined]
    token: str = settings.csrf.token(USER)
    return token


def post(client: TestClient, path: str, data: dict[str, Any], **headers: str) -> Any:
    return client.post(path, data=data, headers=headers or SAME_ORIGIN)


def status_of(repo: OutboxRepository, attempt_id: int) -> str:
    return str(scalar(repo, "SELECT status FROM email_delivery_attempts WHERE id = %s", (attempt_id,)))


def last_event(repo: OutboxRepository, attempt_id: int) -> tuple[str, str, str]:
    cursor = repo.connection.cursor()
    cursor.execute(
        "SELECT actor, db_account, detail FROM email_delivery_events WHERE attempt_id = %s ORDER BY id DESC LIMIT 1",
        (attempt_id,),
    )
    row = cursor.fetchone()
    cursor.close()
    assert row is not None
    return row[0], row[1], row[2]  # type: ignore[return-value]


# --- authentication -----------------------------------------------------------------------------------
def test_every_page_needs_a_user_and_a_basic_challenge_asks_for_one(console: ConsoleUnderTest) -> None:
    with TestClient(console.app) as anonymous:
        for path in (
            "/",
            "/emails?status=Pending",
            "/emails/1",
            "/emails/1/html",
            "/bulk",
            "/static/htmx.min.js",
        ):
            response = anonymous.get(path)
            assert response.status_code == 401, path
            assert response.headers["WWW-Authenticate"].startswith('Basic realm="email-outbox console"')
            assert response.headers["X-Frame-Options"] == "DENY"
        assert anonymous.get("/", auth=(USER, "wrong password")).status_code == 401
        assert anonymous.get("/", auth=("mallory", PASSWORD)).status_code == 401
        assert anonymous.get("/", headers={"Authorization": "Basic !!notbase64"}).status_code == 401
        assert anonymous.get("/", auth=(USER, PASSWORD)).status_code == 200


def test_console_user_add_takes_the_password_from_stdin_and_stores_a_salted_scrypt_hash(
    tmp_path: Path,
) -> None:
    users = tmp_path / "users"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'worker'}:{ROOT}"}
    for name in ("bob", "carol"):
        done = subprocess.run(
            [sys.executable, "-m", "email_outbox.cli", "console-user", "add", name, "--users-file", str(users)],
            input="s3cret password\n", capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    text = users.read_text()
    assert "s3cret" not in text
    assert oct(users.stat().st_mode & 0o777) == "0o600"
    loaded = UsersFile.load(users)
    assert set(loaded.hashes) == {"bob", "carol"}
    assert loaded.hashes["bob"].startswith("scrypt$131072$8$1$")
    assert loaded.hashes["bob"] != loaded.hashes["carol"], "salted: the same password hashes differently"
    assert loaded.verify("bob", "s3cret password") and not loaded.verify("bob", "s3cret passwore")
    assert not verify_password("x", "not-a-hash")
    # The password is never an argument.
    refused = subprocess.run(
        [sys.executable, "-m", "email_outbox.cli", "console-user", "add", "dan", "--users-file", str(users),
         "--password", "x"], capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2 and "unrecognized arguments" in refused.stderr
    short = subprocess.run(
        [sys.executable, "-m", "email_outbox.cli", "console-user", "add", "dan", "--users-file", str(users)],
        input="short\n", capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert short.returncode == 2 and "at least 8 characters" in short.stderr


def test_the_console_refuses_to_start_without_authentication_or_open_beyond_loopback(
    dsn: DatabaseDsn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["console", "--dsn", dsn.url()]
    assert main(base) == 2
    assert "authentication is required" in capsys.readouterr().err
    assert main([*base, "--insecure-no-auth", "--listen", "0.0.0.0:8025"]) == 2
    assert "loopback address only" in capsys.readouterr().err
    assert main([*base, "--trusted-user-header", "X-Forwarded-User"]) == 2
    assert "needs --trusted-proxy" in capsys.readouterr().err
    assert main([*base, "--users-file", str(tmp_path / "missing")]) == 2
    assert "console-user add" in capsys.readouterr().err
    assert main([*base, "--insecure-no-auth", "--users-file", str(tmp_path / "x")]) == 2
    assert "choose one" in capsys.readouterr().err


def test_basic_authentication_beyond_loopback_needs_a_tls_proxy_or_an_explicit_flag(
    dsn: DatabaseDsn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HTTP Basic sends the password with every request: beyond loopback the console starts only behind
    a TLS proxy (an https --public-origin) or when told in so many words that passwords go in clear."""
    users = tmp_path / "users"
    add_user(users, USER, PASSWORD)
    base = ["console", "--dsn", dsn.url(), "--users-file", str(users)]
    assert main([*base, "--listen", "0.0.0.0:8025"]) == 2
    assert "would send each password in clear" in capsys.readouterr().err
    assert main([*base, "--listen", "0.0.0.0:8025", "--public-origin", "http://outbox.example.com"]) == 2
    assert main([*base, "--listen", "0.0.0.0:8025", "--public-origin", "https://a.example.com",
                 "--public-origin", "http://b.example.com"]) == 2, "every origin must be https"  # fmt: skip
    for extra in (
        ["--listen", "127.0.0.1:8025"],
        ["--listen", "0.0.0.0:8025", "--public-origin", "https://outbox.example.com"],
        ["--listen", "0.0.0.0:8025", "--insecure-plain-http"],
    ):
        settings, _, _ = build_settings(build_parser().parse_args([*base, *extra]))
        assert isinstance(settings.authenticator, BasicAuth), extra  # type: ignore[attr-defined]
        settings.database.close()  # type: ignore[attr-defined]


def test_a_trusted_user_header_counts_only_from_the_trusted_proxy(dsn: DatabaseDsn, tmp_path: Path) -> None:
    header = TrustedHeader("X-Forwarded-User", [ipaddress.ip_network("10.1.0.0/16")])
    made = make_console(dsn, tmp_path, authenticator=header)
    try:
        with TestClient(made.app, client=("10.1.2.3", 40000)) as proxy:
            page = proxy.get("/", headers={"X-Forwarded-User": "erin"})
            assert page.status_code == 200 and "erin" in page.text
            assert proxy.get("/").status_code == 403, "no header, no user"
            assert proxy.get("/", headers={"X-Forwarded-User": "bad name\r\nx"}).status_code == 403
        with TestClient(made.app, client=("10.2.0.1", 40000)) as elsewhere:
            assert elsewhere.get("/", headers={"X-Forwarded-User": "erin"}).status_code == 403
    finally:
        made.close()


# --- pages --------------------------------------------------------------------------------------------
def test_overview_shows_counts_oldest_due_overdue_leases_and_sent_per_minute(
    client: TestClient, repo: OutboxRepository
) -> None:
    for _ in range(3):
        sent_row(repo)
    unknown_row(repo)
    repo.enqueue("pending-1", "p@example.com", "waiting", text_body="x")
    claim = repo.enqueue("processing-1", "q@example.com", "claimed", text_body="x").attempt_id
    assert repo.try_claim(claim, "tok-overdue", "worker-z", 1) == 1
    cursor = repo.connection.cursor()
    cursor.execute(
        "UPDATE email_delivery_attempts SET lease_expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE WHERE id = %s",
        (claim,),
    )
    cursor.close()
    page = client.get("/")
    assert page.status_code == 200
    counts = dict(
        re.findall(
            r'data-status="(\w+)">\s*<span class="label">\w+</span><span class="count">([\d,]+)', page.text
        )
    )
    assert counts == {
        "Pending": "1",
        "Retrying": "0",
        "Processing": "1",
        "Sent": "3",
        "Failed": "0",
        "UnknownOutcome": "1",
    }
    assert re.search(r'id="oldest-due">waiting \d+s \(due', page.text)
    assert re.search(r'id="overdue-leases" class="warn">1 ', page.text)
    assert "(3 in total, peak 3/min)" in page.text
    assert page.text.count('class="bar"') == 60
    assert "<title>3 sent 0 min ago</title>" in page.text
    # Live refresh: htmx asks for the fragment every 5 s, which is the same panel alone.
    assert 'hx-get="/fragments/overview" hx-trigger="every 5s"' in page.text
    fragment = client.get("/fragments/overview")
    assert fragment.text.startswith('<section id="overview"') and "<html" not in fragment.text
    assert client.get("/static/htmx.min.js").headers["content-type"].startswith("text/javascript")


def test_overview_counts_stop_at_the_cap_and_say_so(
    console: ConsoleUnderTest, client: TestClient, repo: OutboxRepository
) -> None:
    """A status with more rows than the cap reads "cap+": each 5-second refresh then reads at most the
    cap's worth of index entries a status, where an uncapped count read every Sent row ever kept."""
    console.settings.overview_count_cap = 2
    for _ in range(3):
        sent_row(repo)
    unknown_row(repo)
    page = client.get("/")
    counts = dict(
        re.findall(
            r'data-status="(\w+)">\s*<span class="label">\w+</span><span class="count">([\d,+]+)', page.text
        )
    )
    assert (counts["Sent"], counts["UnknownOutcome"], counts["Pending"]) == ("2+", "1", "0")
    for _ in range(2):
        unknown_row(repo)
    assert re.search(r'id="unknown-count" class="warn">2\+ need an operator', client.get("/").text)


def test_list_per_status_pages_by_keyset_newest_first_with_a_hard_limit(
    client: TestClient, repo: OutboxRepository
) -> None:
    ids = [unknown_row(repo) for _ in range(7)]
    sent_row(repo)
    seen: list[int] = []
    url = "/emails?status=UnknownOutcome&limit=3"
    pages = 0
    while url:
        page = client.get(url)
        assert page.status_code == 200
        seen += [int(i) for i in re.findall(r'<td><a href="/emails/(\d+)">', page.text)]
        nxt = re.search(r'id="next-page" href="([^"]+)"', page.text)
        url = nxt.group(1).replace("&amp;", "&") if nxt else ""
        assert "offset" not in url.lower()
        pages += 1
    assert seen == sorted(ids, reverse=True) and pages == 3
    big = client.get("/emails?status=UnknownOutcome&limit=100000")
    assert big.status_code == 200 and "200 a page" in big.text, "the page size is capped"
    assert client.get("/emails?status=Nope").status_code == 400
    assert client.get("/emails?status=Sent&cursor=abc").status_code == 400


def test_search_by_notification_id_or_recipient_prefix_pages_in_index_order(
    client: TestClient, repo: OutboxRepository
) -> None:
    for i in range(5):
        repo.enqueue(f"order-42:{i}", f"zed{i}@shop.example.com", f"order {i}", text_body="x")
    repo.enqueue("order-420", "other@example.com", "another order", text_body="x")
    repo.enqueue("order_4x", "someone@example.com", "an underscore", text_body="x")
    page = client.get("/emails", params={"q": "order-42:", "by": "notification_id", "limit": 2})
    found = re.findall(r'class="mono"><a href="/emails/\d+">([^<]+)</a>', page.text)
    assert found == ["order-42:0", "order-42:1"]
    names = list(found)
    while (nxt := re.search(r'id="next-page" href="([^"]+)"', page.text)) is not None:
        page = client.get(nxt.group(1).replace("&amp;", "&"))
        names += re.findall(r'class="mono"><a href="/emails/\d+">([^<]+)</a>', page.text)
    assert names == [f"order-42:{i}" for i in range(5)]
    by_recipient = client.get("/emails", params={"q": "ZED", "by": "recipient"})
    assert len(re.findall(r"@shop.example.com", by_recipient.text)) == 5, "recipient prefix, any case"
    # LIKE wildcards in the search text are literal: `order_` does not match `order-420`.
    literal = client.get("/emails", params={"q": "order_", "by": "notification_id"})
    assert "order_4x" in literal.text and "order-420" not in literal.text
    assert "No emails." in client.get("/emails", params={"q": "%", "by": "recipient"}).text


def test_search_wildcards_stay_literal_on_a_server_with_no_backslash_escapes(
    dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    """Under NO_BACKSLASH_ESCAPES MySQL reads a backslash as an ordinary character (reported for LIKE
    patterns too), so a '_' in a search would match any character; every search names its own
    escape character (ESCAPE '!'). MariaDB keeps the backslash as LIKE's escape under that mode, so
    there the test proves the console's searches work under it at all, and on MySQL 8 that they stay
    literal."""
    repo.enqueue("nbe-420", "other@example.com", "s", text_body="x")
    repo.enqueue("nbe_4x", "someone@example.com", "s", text_body="x")
    cursor = repo.connection.cursor()
    cursor.execute("SELECT @@GLOBAL.sql_mode")
    (previous,) = cursor.fetchone()  # type: ignore[misc]
    try:
        cursor.execute("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_BACKSLASH_ESCAPES')")
    except (
        mysql.connector.Error
    ) as exc:  # 1227 on a raw cursor: the repository's translation is not in the way
        pytest.skip(f"SKIP: the test account may not set the global sql_mode ({exc})")
    made = make_console(dsn, tmp_path)  # its connections start under that mode
    try:
        with TestClient(made.app) as client:
            client.auth = (USER, PASSWORD)
            literal = client.get("/emails", params={"q": "nbe_", "by": "notification_id"})
            assert "nbe_4x" in literal.text and "nbe-420" not in literal.text
            assert "No emails." in client.get("/emails", params={"q": "%", "by": "recipient"}).text
    finally:
        made.close()
        cursor.execute("SET GLOBAL sql_mode = %s", (previous,))
        cursor.close()


def test_one_email_shows_every_field_its_bodies_history_and_attachments(
    client: TestClient, repo: OutboxRepository
) -> None:
    attempt_id = message_with_attachments(repo)
    page = client.get(f"/emails/{attempt_id}")
    assert page.status_code == 200
    fields = re.findall(r"<tr><th>(\w+)</th><td", page.text)
    for name in ("id", "notification_id", "to_address", "from_address", "subject", "status", "attempt_count",
                 "max_attempts", "next_attempt_at", "claim_token", "claimed_by", "lease_expires_at",
                 "last_error_code", "last_error_message", "provider_message_id", "sent_at", "created_at",
                 "updated_at", "message_options", "attachment_bytes"):  # fmt: skip
        assert name in fields, name
    assert '<pre class="body" id="text-body">The invoice is attached.</pre>' in page.text
    assert f'src="/emails/{attempt_id}/html" sandbox=""' in page.text
    assert "invoice-42.pdf" in page.text and "logo@example.com" in page.text and ">13<" in page.text
    assert re.search(r"<td>- → Pending</td>", page.text), "the enqueue event"
    assert client.get("/emails/999999").status_code == 404


def test_the_html_body_is_served_sandboxed_with_no_script_and_no_remote_load(
    client: TestClient, repo: OutboxRepository
) -> None:
    attempt_id = hostile_row(repo)
    frame = client.get(f"/emails/{attempt_id}/html")
    assert frame.status_code == 200 and frame.text == XSS_HTML
    csp = frame.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "sandbox" in csp and "script-src" not in csp
    assert "img-src data:" in csp and "frame-ancestors 'self'" in csp
    assert frame.headers["X-Frame-Options"] == "SAMEORIGIN"
    assert frame.headers["X-Content-Type-Options"] == "nosniff"
    no_html = sent_row(repo)
    assert client.get(f"/emails/{no_html}/html").status_code == 404


def test_attacker_controlled_text_is_escaped_everywhere(client: TestClient, repo: OutboxRepository) -> None:
    attempt_id = hostile_row(repo)
    pages = [
        client.get(f"/emails/{attempt_id}").text,
        client.get("/emails?status=UnknownOutcome").text,
        client.get("/emails", params={"q": "<script>", "by": "notification_id"}).text,
    ]
    for text in pages:
        assert "<script>window" not in text and "<img src=x" not in text
    detail = pages[0]
    assert "&lt;script&gt;window.__pwned_nid=1&lt;/script&gt;nid" in detail
    assert "&#34;&gt;&lt;img src=x onerror=&#34;window.__pwned_subject=1&#34;&gt;subject" in detail
    assert "&lt;/pre&gt;&lt;script&gt;window.__pwned_text=1&lt;/script&gt;" in detail
    assert XSS_HTML not in detail, "the HTML body only ever goes into the sandboxed frame"
    assert XSS_NOTIFICATION_ID not in detail and XSS_SUBJECT not in detail and XSS_TEXT not in detail
    # Control and bidi characters (written by other means than the procedures) are shown, never obeyed.
    rtl = repo.enqueue("rtl", "a@example.com", "s", text_body="x").attempt_id
    cursor = repo.connection.cursor()
    cursor.execute(
        "UPDATE email_delivery_attempts SET subject = %s WHERE id = %s", ("inv\u202egpj.exe\x1b[2J", rtl)
    )
    cursor.close()
    shown = client.get(f"/emails/{rtl}").text
    assert "inv\\u202egpj.exe\\x1b[2J" in shown and "\u202e" not in shown and "\x1b" not in shown


# --- actions ------------------------------------------------------------------------------------------
def test_requeue_goes_through_the_procedure_and_the_audit_event_names_the_console_user(
    client: TestClient, repo: OutboxRepository
) -> None:
    attempt_id = unknown_row(repo)
    page = client.get(f"/emails/{attempt_id}")
    assert "This may send the email twice: if SES accepted the earlier attempt" in page.text
    token = csrf(client, f"/emails/{attempt_id}")
    response = post(
        client, f"/emails/{attempt_id}/requeue", {"csrf_token": token, "reason": "no SES Send event"}
    )
    assert (
        response.status_code == 303 and response.headers["location"] == f"/emails/{attempt_id}?done=requeued"
    )
    assert status_of(repo, attempt_id) == "Pending"
    actor, db_account, detail = last_event(repo, attempt_id)
    assert actor == "alice (console)" and detail == "requeued: no SES Send event"
    assert db_account.startswith("root@")
    after = client.get(f"/emails/{attempt_id}?done=requeued").text
    assert "Requeued: UnknownOutcome -&gt; Pending" in after and "alice (console)" in after
    assert 'id="requeue-form"' not in after, "no actions on a row that is not UnknownOutcome"
    again = post(client, f"/emails/{attempt_id}/requeue", {"csrf_token": token, "reason": "twice"})
    assert again.headers["location"].endswith("done=unchanged")


def test_resolve_records_the_verdict_and_a_reason_is_required(
    client: TestClient, repo: OutboxRepository
) -> None:
    a, b = unknown_row(repo), unknown_row(repo)
    token = csrf(client, f"/emails/{a}")
    missing = post(client, f"/emails/{a}/resolve", {"csrf_token": token, "outcome": "Sent", "reason": "  "})
    assert missing.status_code == 400 and "a reason is required" in missing.text
    assert status_of(repo, a) == "UnknownOutcome"
    bad = post(client, f"/emails/{a}/resolve", {"csrf_token": token, "outcome": "Maybe", "reason": "x"})
    assert bad.status_code == 400 and status_of(repo, a) == "UnknownOutcome"
    control = post(
        client, f"/emails/{a}/resolve", {"csrf_token": token, "outcome": "Sent", "reason": "a\x1bb"}
    )
    assert control.status_code == 400 and "reason" in control.text and status_of(repo, a) == "UnknownOutcome"
    sent = post(client, f"/emails/{a}/resolve",
                {"csrf_token": token, "outcome": "Sent", "reason": "SES Send event", "message_id": "0100-xyz"})  # fmt: skip
    assert sent.status_code == 303 and status_of(repo, a) == "Sent"
    assert (
        scalar(repo, "SELECT provider_message_id FROM email_delivery_attempts WHERE id = %s", (a,))
        == "0100-xyz"
    )
    assert last_event(repo, a)[0] == "alice (console)"
    failed = post(
        client, f"/emails/{b}/resolve", {"csrf_token": token, "outcome": "Failed", "reason": "stale"}
    )
    assert failed.status_code == 303 and status_of(repo, b) == "Failed"
    assert last_event(repo, b)[2] == "resolved as Failed: stale"


def test_state_changes_need_the_csrf_token_and_a_same_origin_request(
    client: TestClient, repo: OutboxRepository
) -> None:
    attempt_id = unknown_row(repo)
    token = csrf(client, f"/emails/{attempt_id}")
    path = f"/emails/{attempt_id}/requeue"
    form = {"csrf_token": token, "reason": "r"}
    refusals = [
        post(client, path, {"reason": "r"}),  # no token
        post(client, path, {"csrf_token": "0" * 64, "reason": "r"}),  # a wrong one
        post(client, path, form, Origin="https://evil.example"),
        post(client, path, form, **{"Origin": ORIGIN, "Sec-Fetch-Site": "cross-site"}),
        post(client, path, form, **{"Sec-Fetch-Site": "same-site"}),
        client.post(path, data=form),  # neither Origin nor Sec-Fetch-Site
    ]
    for response in refusals:
        assert response.status_code == 403, response.text
        assert "refused" in response.text
    assert status_of(repo, attempt_id) == "UnknownOutcome"
    # Another user's token is not this user's.
    assert client.app.state.settings.csrf.token("bob") != token  # type: ignore[attr-defined]
    assert client.get(path).status_code == 405, "no change by GET"
    assert post(client, path, form, Origin=ORIGIN).status_code == 303
    assert status_of(repo, attempt_id) == "Pending"


def test_bulk_works_on_a_frozen_capped_list_after_confirmation(
    dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    made = make_console(dsn, tmp_path, bulk_cap=3)
    try:
        with TestClient(made.app, follow_redirects=False) as client:
            client.auth = (USER, PASSWORD)
            ids = [unknown_row(repo, to=f"bulk{i}@example.com") for i in range(4)]
            other = unknown_row(repo, to="elsewhere@example.org")
            token = csrf(client, "/bulk")
            preview = post(client, "/bulk/preview", {"csrf_token": token, "action": "requeue",
                                                     "older_than": "0s", "recipient_prefix": "bulk"})  # fmt: skip
            assert preview.status_code == 200
            assert "requeue: 3 emails" in preview.text.lower() and 'id="capped"' in preview.text
            frozen = re.search(r'name="ids" value="([\d,]+)"', preview.text).group(1)  # type: ignore[union-attr]
            signature = re.search(r'name="signature" value="(\w+)"', preview.text).group(1)  # type: ignore[union-attr]
            issued = re.search(r'name="issued" value="(\d+)"', preview.text).group(1)  # type: ignore[union-attr]
            assert frozen == ",".join(map(str, ids[:3]))
            late = unknown_row(repo, to="bulk-late@example.com")  # matches now, but the list is frozen
            form = {
                "csrf_token": token,
                "action": "requeue",
                "ids": frozen,
                "issued": issued,
                "signature": signature,
                "reason": "INC-1",
            }
            unconfirmed = post(client, "/bulk/apply", form)
            assert unconfirmed.status_code == 400 and "confirmation" in unconfirmed.text
            tampered = post(client, "/bulk/apply", {**form, "ids": f"{frozen},{other}", "confirm": "yes"})
            assert tampered.status_code == 400 and "not the one the confirmation page showed" in tampered.text
            # The user cannot sign a list of their own: the key is not the CSRF token on the page.
            longer = f"{frozen},{other}"
            forged = hmac.new(token.encode(), f"bulk\0{USER}\0requeue\0{longer}".encode(), hashlib.sha256)
            refused = post(
                client,
                "/bulk/apply",
                {**form, "ids": longer, "signature": forged.hexdigest(), "confirm": "yes"},
            )
            assert refused.status_code == 400 and "not the one the confirmation page showed" in refused.text
            # A confirmation page is good for 15 minutes.
            old = str(int(time.time()) - 901)
            stale = made.settings.csrf.sign("bulk", USER, "requeue", frozen, old)
            expired = post(
                client, "/bulk/apply", {**form, "issued": old, "signature": stale, "confirm": "yes"}
            )
            assert expired.status_code == 400 and "more than 15 minutes old" in expired.text
            # One of them resolved by someone else meanwhile: skipped, not overwritten.
            assert repo.resolve_unknown_outcome(ids[1], "Failed", "bob", "cancelled") == 1
            done = post(client, "/bulk/apply", {**form, "confirm": "yes"})
            assert done.status_code == 200
            assert f"2 done, 1 skipped (no longer UnknownOutcome): {ids[1]}" in done.text
            assert [status_of(repo, i) for i in ids] == ["Pending", "Failed", "Pending", "UnknownOutcome"]
            assert status_of(repo, late) == "UnknownOutcome" and status_of(repo, other) == "UnknownOutcome"
            assert last_event(repo, ids[0])[:3:2] == ("alice (console)", "requeued: INC-1")
            resolve = post(client, "/bulk/preview", {"csrf_token": token, "action": "resolve-Failed",
                                                     "older_than": "1h", "recipient_prefix": ""})  # fmt: skip
            assert "No UnknownOutcome email matches." in resolve.text, (
                "none has been UnknownOutcome for an hour"
            )
    finally:
        made.close()


def assert_read_only(client: TestClient, attempt_id: int) -> None:
    """The console offers no action and refuses one posted anyway, saying it is read-only."""
    page = client.get(f"/emails/{attempt_id}")
    assert page.status_code == 200 and "read-only" in page.text
    assert 'id="requeue-form"' not in page.text and "/bulk" not in page.text
    token = csrf(client)
    refused = post(client, f"/emails/{attempt_id}/requeue", {"csrf_token": token, "reason": "x"})
    assert refused.status_code == 403 and "read-only" in refused.text
    assert post(client, "/bulk/preview", {"csrf_token": token, "action": "requeue"}).status_code == 403


def test_a_viewer_account_gets_a_read_only_console(
    server: TestServer, dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    attempt_id = unknown_row(repo)
    with granted_account(server, dsn, "viewer") as viewer:
        made = make_console(viewer, tmp_path)
        try:
            assert not made.settings.can_act
            with TestClient(made.app, follow_redirects=False) as client:
                client.auth = (USER, PASSWORD)
                assert_read_only(client, attempt_id)
                overview = client.get("/")
                assert overview.status_code == 200 and 'data-status="UnknownOutcome"' in overview.text
        finally:
            made.close()
        # The account itself is refused by the server too, whatever a console would try.
        viewer_repo = OutboxRepository.open(viewer)
        try:
            with pytest.raises(AccessDenied):
                viewer_repo.requeue_unknown_outcome(attempt_id, "eve", "sneaky")
        finally:
            viewer_repo.close()
    assert status_of(repo, attempt_id) == "UnknownOutcome"


def test_a_console_role_account_acts_and_can_do_nothing_else_an_operator_can(
    server: TestServer, dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    """The console needs requeue and resolve, not the operator's enqueue, allow-list or purge: its
    account, or its DSN file, in the wrong hands cannot send mail."""
    attempt_id = unknown_row(repo)
    with granted_account(server, dsn, "console") as account:
        made = make_console(account, tmp_path)
        try:
            assert made.settings.can_act
            with TestClient(made.app, follow_redirects=False) as client:
                client.auth = (USER, PASSWORD)
                assert client.get("/").status_code == 200
                response = post(
                    client, f"/emails/{attempt_id}/requeue", {"csrf_token": csrf(client), "reason": "ok"}
                )
                assert response.status_code == 303
        finally:
            made.close()
        console_repo = OutboxRepository.open(account)
        try:
            for attempt in (
                lambda: console_repo.enqueue("from-console", "x@example.com", "s", text_body="x"),
                lambda: console_repo.purge_bodies(0, 10),
            ):
                with pytest.raises(AccessDenied):
                    attempt()
        finally:
            console_repo.close()
    assert status_of(repo, attempt_id) == "Pending"


def test_read_only_flag_turns_the_actions_off_for_any_account(
    dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    """The flag alone turns them off: this account may act (the session's root), the console does not."""
    attempt_id = unknown_row(repo)
    made = make_console(dsn, tmp_path, read_only=True)
    try:
        assert made.settings.database.can_act and not made.settings.can_act
        with TestClient(made.app, follow_redirects=False) as client:
            client.auth = (USER, PASSWORD)
            assert_read_only(client, attempt_id)
    finally:
        made.close()
    assert status_of(repo, attempt_id) == "UnknownOutcome"


def test_the_operator_role_account_runs_the_console_and_acts(
    accounts: dict[str, DatabaseDsn], tmp_path: Path, repo: OutboxRepository
) -> None:
    attempt_id = unknown_row(repo)
    made = make_console(accounts["operator"], tmp_path)
    try:
        assert made.settings.can_act
        with TestClient(made.app, follow_redirects=False) as client:
            client.auth = (USER, PASSWORD)
            assert client.get("/").status_code == 200
            assert client.get(f"/emails/{attempt_id}").status_code == 200
            response = post(
                client, f"/emails/{attempt_id}/requeue", {"csrf_token": csrf(client), "reason": "ok"}
            )
            assert response.status_code == 303
    finally:
        made.close()
    actor, db_account, _ = last_event(repo, attempt_id)
    assert actor == "alice (console)" and db_account.startswith(accounts["operator"].user + "@")


# --- headers, errors, bounds ----------------------------------------------------------------------------
def test_every_response_carries_the_security_headers(client: TestClient, repo: OutboxRepository) -> None:
    attempt_id = unknown_row(repo)
    for response in (client.get("/"), client.get("/emails/999999"), client.get(f"/emails/{attempt_id}"),
                     client.get("/nowhere"), client.post(f"/emails/{attempt_id}/requeue", data={})):  # fmt: skip
        csp = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
        assert response.headers["Cache-Control"] == "no-store"
    page = client.get("/").text
    assert "<script>" not in page and " style=" not in page and "onclick" not in page, "nothing inline"


def test_no_stack_trace_reaches_the_browser(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: ConsoleReads, count_cap: int, provider_name: str) -> None:
        raise RuntimeError("secret internals at /srv/app.py line 12")

    monkeypatch.setattr(ConsoleReads, "overview", broken)
    # As a server runs it: the exception goes to the error handler, not back to the test.
    with TestClient(client.app, raise_server_exceptions=False) as served:
        response = served.get("/", auth=(USER, PASSWORD))
    assert response.status_code == 500
    assert "secret internals" not in response.text and "Traceback" not in response.text
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "secret internals" in caplog.text, "the log has it"


def test_a_database_that_does_not_answer_is_a_plain_503(console: ConsoleUnderTest) -> None:
    console.settings.database.close()
    console.settings.database.dsn = DatabaseDsn("root", "", "127.0.0.1", 9, "nowhere")
    with TestClient(console.app) as client:
        response = client.get("/", auth=(USER, PASSWORD))
    assert response.status_code == 503
    assert "did not answer in time or is unavailable" in response.text and "Traceback" not in response.text


def test_every_console_connection_has_a_statement_time_limit(
    console: ConsoleUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = console.settings.database
    with database.session() as reads:
        if database.flavour == "MariaDB":
            assert float(reads.select("SELECT @@max_statement_time AS t")[0]["t"]) == 5.0
        else:
            assert int(reads.select("SELECT @@max_execution_time AS t")[0]["t"]) == 5000
    # A query past the limit is stopped by the server and becomes a plain 503, not a hung page.
    database.close()
    database.statement_timeout_seconds = 0.3

    def runaway(self: ConsoleReads, count_cap: int, provider_name: str) -> Any:
        return self.select(
            "SELECT COUNT(*) AS n FROM information_schema.COLUMNS a, information_schema.COLUMNS b,"
            " information_schema.COLUMNS c"
        )

    monkeypatch.setattr(ConsoleReads, "overview", runaway)
    started = time.monotonic()
    with TestClient(console.app) as client:
        response = client.get("/", auth=(USER, PASSWORD))
    assert response.status_code == 503 and "did not answer in time" in response.text
    assert time.monotonic() - started < 5


def test_no_auth_names_the_local_user_and_only_listens_on_loopback(
    dsn: DatabaseDsn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert NoAuth().name == f"{getpass.getuser()}-noauth", "the login that started it, marked"
    made = make_console(dsn, tmp_path, authenticator=NoAuth("ops"))
    try:
        with TestClient(made.app) as client:
            page = client.get("/")
            assert page.status_code == 200 and '<span class="who">ops</span>' in page.text
    finally:
        made.close()
    base = ["console", "--dsn", dsn.url(), "--insecure-no-auth"]
    for host in ("0.0.0.0:8025", "[::]:8025", "192.0.2.1:8025"):
        assert main([*base, "--listen", host]) == 2, host
        assert "loopback address only" in capsys.readouterr().err
    for host in ("127.0.0.1:8025", "[::1]:8025"):
        settings, _, _ = build_settings(build_parser().parse_args([*base, "--listen", host]))
        assert isinstance(settings.authenticator, NoAuth), host  # type: ignore[attr-defined]
        settings.database.close()  # type: ignore[attr-defined]


def test_repeated_failed_logins_from_one_address_are_refused_but_the_right_password_gets_in(
    console: ConsoleUnderTest,
) -> None:
    add_user(console.users_file, "bob", "bob's own passphrase")
    console.settings.authenticator = BasicAuth(UsersFile.load(console.users_file))
    console.settings.failures = FailedLogins(per_user=3, per_address=100)
    with TestClient(console.app, client=("192.0.2.7", 4000)) as guesser:
        for _ in range(3):
            assert guesser.get("/", auth=(USER, "guess")).status_code == 401
        assert guesser.get("/", auth=(USER, "guess")).status_code == 429, "past the limit, a guess waits"
        # A guesser cannot lock the real user out: the right password is never refused by the limiter.
        assert guesser.get("/", auth=(USER, PASSWORD)).status_code == 200
        # Behind a shared proxy or NAT, someone guessing alice's password does not hold bob up.
        assert guesser.get("/", auth=("bob", "bob's own passphrase")).status_code == 200
    with TestClient(console.app, client=("192.0.2.8", 4000)) as other:
        assert other.get("/", auth=(USER, "guess")).status_code == 401, "another address has its own count"


def test_guesses_spread_over_names_or_an_ipv6_64_are_held_to_the_address_limit() -> None:
    limits = FailedLogins(per_user=20, per_address=100)
    assert all(limits.start("192.0.2.9", f"name{i}") for i in range(100))
    assert not limits.start("192.0.2.9", "anyone-else"), "a hundred tries from one address: past its limit"
    # One client holds a whole IPv6 /64: its addresses count as one.
    assert all(limits.start(f"2001:db8:0:1::{i:x}", USER) for i in range(1, 21))
    assert not limits.start("2001:db8:0:1::ffff", USER)
    assert limits.start("2001:db8:0:2::1", USER), "another /64 is another client"
    # A burst of parallel tries counts from each try's start, against its user and its address alike.
    burst = FailedLogins(per_user=20, per_address=100)
    assert [burst.start("192.0.2.10", f"n{i}") for i in range(600)].count(True) == 100
    single = FailedLogins(per_user=20)
    assert all(single.start("192.0.2.11", USER) for _ in range(20))
    single.succeeded("192.0.2.11", USER)
    assert single.start("192.0.2.11", USER), "a login that succeeded takes its count back"


def test_a_console_on_loopback_answers_only_its_own_host_names_against_dns_rebinding(
    dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    """A page on evil.example whose DNS name is rebound to 127.0.0.1 reaches a loopback console as
    "same-origin" (its Origin matches its Host): with --insecure-no-auth it could read and act."""
    attempt_id = unknown_row(repo)
    made = make_console(dsn, tmp_path, authenticator=NoAuth("ops"))
    made.settings.allowed_hosts = loopback_hosts(8025, frozenset({"https://console.example.com"}))
    rebound = {
        "Host": "evil.example:8025",
        "Origin": "http://evil.example:8025",
        "Sec-Fetch-Site": "same-origin",
    }
    try:
        with TestClient(made.app, base_url="http://127.0.0.1:8025", follow_redirects=False) as client:
            assert (
                client.get(f"/emails/{attempt_id}", headers={"Host": "evil.example:8025"}).status_code == 421
            )
            token = made.settings.csrf.token("ops")
            refused = client.post(
                f"/emails/{attempt_id}/requeue", data={"csrf_token": token, "reason": "r"}, headers=rebound
            )
            assert refused.status_code == 421 and status_of(repo, attempt_id) == "UnknownOutcome"
            assert client.get("/").status_code == 200, "127.0.0.1:8025 is its own name"
            assert client.get("/", headers={"Host": "localhost:8025"}).status_code == 200
            assert client.get("/", headers={"Host": "console.example.com"}).status_code == 200, (
                "the TLS proxy's"
            )
    finally:
        made.close()


def test_a_form_must_be_small_and_say_its_length(client: TestClient, repo: OutboxRepository) -> None:
    attempt_id = unknown_row(repo)
    token = csrf(client, f"/emails/{attempt_id}")
    huge = post(client, f"/emails/{attempt_id}/requeue", {"csrf_token": token, "reason": "x" * 300_000})
    assert huge.status_code == 413
    assert status_of(repo, attempt_id) == "UnknownOutcome"


def test_email_outbox_console_serves_the_page_with_uvicorn(dsn: DatabaseDsn, tmp_path: Path) -> None:
    users = tmp_path / "users"
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'worker'}:{ROOT}", "EMAIL_OUTBOX_DSN": dsn.url()}
    added = subprocess.run(
        [sys.executable, "-m", "email_outbox.cli", "console-user", "add", USER, "--users-file", str(users)],
        input=PASSWORD + "\n", capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "email_outbox.cli", "console", "--users-file", str(users),
         "--listen", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert f"email-outbox console on http://127.0.0.1:{port}/ (operator)" in first, first
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/", auth=(USER, PASSWORD), timeout=5)
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "the console never answered"
                time.sleep(0.05)
        assert response.status_code == 200 and 'data-status="UnknownOutcome"' in response.text
        assert "server" not in response.headers, "uvicorn does not name itself"
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 401
        rebound = httpx.get(f"http://127.0.0.1:{port}/", headers={"Host": f"evil.example:{port}"}, timeout=5)
        assert rebound.status_code == 421, "on loopback it answers only its own host names"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_provider_events_and_suppression_are_shown_escaped(
    dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    attempt_id = sent_row(repo)
    cursor = repo.connection.cursor()
    try:
        cursor.execute(
            "INSERT INTO email_provider_events (event_key, attempt_id, event_type, ses_message_id, recipient,"
            " event_at, kind, subkind, detail, recorded_at, recorded_by) VALUES (UNHEX(SHA2('k', 256)), %s,"
            " 'Bounce', 'ses-0100-abc', 'sent@example.com', UTC_TIMESTAMP(6), 'Permanent', 'General',"
            " '<b>550 no such user</b>', UTC_TIMESTAMP(6), 'events')",
            (attempt_id,),
        )
        cursor.execute(
            "INSERT INTO email_suppressed_addresses (address_key, address, reason, detail, added_at, added_by,"
            " added_via) VALUES ('sent@example.com', 'sent@example.com', 'bounce', 'SES Bounce Permanent',"
            " UTC_TIMESTAMP(6), 'events', 'root@localhost')"
        )
        made = make_console(dsn, tmp_path)
        try:
            with TestClient(made.app) as client:
                page = client.get(f"/emails/{attempt_id}", auth=(USER, PASSWORD)).text
        finally:
            made.close()
        assert 'id="provider-events"' in page and "Bounce" in page and "Permanent General" in page
        assert "&lt;b&gt;550 no such user&lt;/b&gt;" in page
        assert 'id="suppressed"' in page and "SES Bounce Permanent" in page
    finally:
        cursor.close()


def test_a_connection_the_server_closed_while_idle_is_replaced_unseen(
    console: ConsoleUnderTest, client: TestClient, server: TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert client.get("/").status_code == 200
    with console.settings.database.session() as reads:
        connection_id = reads.select("SELECT CONNECTION_ID() AS id")[0]["id"]
    admin = server.admin_connection()
    admin.cursor().execute(f"KILL {int(connection_id)}")
    admin.close()
    monkeypatch.setattr("email_outbox.console.pool.IDLE_CHECK_SECONDS", 0.0)
    assert client.get("/").status_code == 200
    with console.settings.database.session() as reads:
        assert reads.select("SELECT CONNECTION_ID() AS id")[0]["id"] != connection_id


def test_a_public_origin_behind_a_tls_proxy_is_accepted_for_forms(
    console: ConsoleUnderTest, client: TestClient, repo: OutboxRepository
) -> None:
    attempt_id = unknown_row(repo)
    token = csrf(client, f"/emails/{attempt_id}")
    form = {"csrf_token": token, "reason": "checked"}
    path = f"/emails/{attempt_id}/requeue"
    assert post(client, path, form, Origin="https://console.example.com").status_code == 403
    console.settings.public_origins = frozenset({"https://console.example.com"})
    assert post(client, path, form, Origin="https://console.example.com").status_code == 303
    assert status_of(repo, attempt_id) == "Pending"


# --- outage: the provider line and redrive (docs/operations.md, SES outage) ---------------------------
def test_the_overview_shows_the_provider_breaker(client: TestClient, repo: OutboxRepository) -> None:
    assert 'id="provider-state"' in client.get("/").text
    repo.breaker_open("ses", "worker-a", "ServiceUnavailable", "503", 60)
    shown = client.get("/fragments/overview").text
    assert "down since" in shown and "last error ServiceUnavailable" in shown


def test_redrive_on_a_failed_email_and_in_bulk(
    dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    made = make_console(dsn, tmp_path, bulk_cap=10)
    try:
        with TestClient(made.app, follow_redirects=False) as client:
            client.auth = (USER, PASSWORD)
            one, two, three = (failed_row(repo) for _ in range(3))
            accepted = sent_row(repo)
            page = client.get(f"/emails/{one}").text
            assert 'id="redrive-form"' in page and 'id="requeue-form"' not in page
            token = csrf(client, f"/emails/{one}")
            assert post(client, f"/emails/{one}/redrive", {"reason": "outage"}).status_code == 403, "CSRF"
            missing = post(client, f"/emails/{one}/redrive", {"csrf_token": token, "reason": " "})
            assert missing.status_code == 400 and status_of(repo, one) == "Failed"
            done = post(client, f"/emails/{one}/redrive", {"csrf_token": token, "reason": "SES outage"})
            assert done.headers["location"] == f"/emails/{one}?done=redriven"
            assert status_of(repo, one) == "Pending"
            assert last_event(repo, one)[0] == "alice (console)"
            assert last_event(repo, one)[2].startswith("redriven: SES outage")
            refused = post(client, f"/emails/{accepted}/redrive", {"csrf_token": token, "reason": "x"})
            assert refused.headers["location"].endswith("done=not-redriven")
            assert status_of(repo, accepted) == "Sent"
            preview = post(client, "/bulk/preview", {"csrf_token": token, "action": "redrive",
                                                     "failed_within": "1d", "recipient_prefix": ""})  # fmt: skip
            assert preview.status_code == 200 and "redrive: 2 emails" in preview.text.lower()
            form = {
                "csrf_token": token,
                "action": "redrive",
                "ids": re.search(r'name="ids" value="([\d,]+)"', preview.text).group(1),  # type: ignore[union-attr]
                "issued": re.search(r'name="issued" value="(\d+)"', preview.text).group(1),  # type: ignore[union-attr]
                "signature": re.search(r'name="signature" value="(\w+)"', preview.text).group(1),  # type: ignore[union-attr]
                "reason": "INC-7",
                "confirm": "yes",
            }
            assert form["ids"] == f"{two},{three}"
            assert repo.redrive_failed(repo.get_row(three).notification_id, "bob", "first") == 1
            applied = post(client, "/bulk/apply", form)
            assert applied.status_code == 200
            assert (
                f"1 done, 1 skipped (not Failed, SES accepted it or may have, or its content is gone): {three}"
                in applied.text
            )
            assert status_of(repo, two) == "Pending" and last_event(repo, two)[0] == "alice (console)"
    finally:
        made.close()


def test_overview_shows_the_accounts_send_rate_its_source_and_the_daily_quota_pause(
    client: TestClient, repo: OutboxRepository
) -> None:
    assert repo.send_rate_report("w-1", 40.0, "override", 38.0, 10, "ses", 10) == 1
    fragment = client.get("/fragments/overview").text
    cell = re.search(r'<td id="send-rate" class="(\w*)">([^<]*)</td>', fragment)
    assert cell is not None
    assert cell.group(1) == "warn"
    assert cell.group(2) == (
        "send rate 38/s, account 40/s (override); handed out in 24 h (SES count at the last report,"
        " plus sends granted since) 10 of 10 (ses); paused: daily quota"
    )


def test_an_operator_closes_the_provider_breaker_from_the_overview(
    server: TestServer, dsn: DatabaseDsn, tmp_path: Path, repo: OutboxRepository
) -> None:
    assert repo.breaker_open("ses", "worker-a", "ServiceUnavailable", "503", 3600) == 1
    with granted_account(server, dsn, "console") as account:
        made = make_console(account, tmp_path)
        try:
            with TestClient(made.app, follow_redirects=False) as client:
                client.auth = (USER, PASSWORD)
                assert 'id="breaker-close-form"' in client.get("/").text
                token = csrf(client)
                assert post(client, "/breaker/close", {"reason": "green"}).status_code == 403, "CSRF"
                assert post(client, "/breaker/close", {"csrf_token": token, "reason": " "}).status_code == 400
                assert repo.breaker_state("ses").state == "open"
                done = post(
                    client, "/breaker/close", {"csrf_token": token, "reason": "SES status page green"}
                )
                assert done.headers["location"] == "/?done=breaker-closed"
                page = client.get(done.headers["location"]).text
                assert "Provider breaker closed" in page and 'id="breaker-close-form"' not in page
        finally:
            made.close()
    state = repo.breaker_state("ses")
    assert state.state == "closed" and state.changed_by == "alice (console)"


def test_overview_names_a_durability_setting_that_can_lose_commits(
    client: TestClient, repo: OutboxRepository
) -> None:
    risks = repo.durability_risks()
    fragment = client.get("/fragments/overview").text
    cell = re.search(r'<td id="durability" class="(\w*)">([^<]*)</td>', fragment)
    assert cell is not None
    if risks:  # the suite's private servers run innodb_flush_log_at_trx_commit=2, for speed
        assert cell.group(1) == "warn"
        assert all(f"{r.setting}={r.value}" in cell.group(2) for r in risks)
    else:
        assert (cell.group(1), cell.group(2)) == ("", "no setting known to lose commits")


def test_overview_shows_each_tenant_its_due_rows_sends_and_why_it_is_paused(
    client: TestClient, repo: OutboxRepository
) -> None:
    repo.tenant_add("news", {"accounts": ["*"]}, "ops", "newsletter")
    repo.tenant_add("codes", {"accounts": ["*"]}, "ops", "one-time codes")
    for i in range(3):
        message = {"to": [f"n{i}@example.com"], "subject": "s", "text": "t", "tenant": "news"}
        repo.enqueue_message(f"news-{i}", json.dumps(message))
    sent = repo.enqueue_message(
        "codes-0", json.dumps({"to": ["c@example.com"], "subject": "s", "text": "t", "tenant": "codes"})
    ).attempt_id
    assert sent is not None
    claim = "tok-codes"
    assert repo.try_claim(sent, claim, "worker-t", 60) == 1
    assert repo.finalize_sent(sent, claim, "ses-tenant-1") == 1
    assert repo.tenant_pause("news", "ops", "list complaint") == 1
    # SES's events of the last day for codes: 8 sends, 2 permanent bounces, 1 complaint.
    cursor = repo.connection.cursor()
    cursor.execute(
        "INSERT INTO email_tenant_event_hours (tenant_id, hour_at, sends, permanent_bounces, complaints)"
        " SELECT id, DATE_FORMAT(UTC_TIMESTAMP(), '%Y-%m-%d %H:00:00'), 8, 2, 1 FROM email_tenants"
        " WHERE name = 'codes'"
    )
    cursor.close()
    page = client.get("/")
    assert page.status_code == 200
    rows = {
        name: dict(re.findall(r'<td class="tenant-([\w-]+)[^"]*">([^<]*)</td>', body))
        for name, body in re.findall(r'<tr data-tenant="([\w-]+)">(.*?)</tr>', page.text, re.S)
    }
    assert set(rows) == {"default", "news", "codes"}
    assert rows["news"]["due"] == "3" and rows["news"]["held"] == "paused: operator"
    assert rows["news"]["oldest"] != "-" and rows["news"]["sent-minute"] == "0"
    assert rows["codes"]["due"] == "0" and rows["codes"]["held"] == "sending"
    assert rows["codes"]["sent-minute"] == "1" and rows["codes"]["sends-24h"] == "8"
    assert rows["codes"]["bounce"] == "25.00%" and rows["codes"]["complaint"] == "12.500%"
    assert rows["news"]["bounce"] == "-" and rows["news"]["complaint"] == "-"
    assert '<td class="tenant-held warn">paused: operator</td>' in page.text
