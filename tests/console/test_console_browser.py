"""The operator console in a real browser: Playwright for Python driving Debian's `chromium` package,
launched by path (db/ensure-server-binary.sh installs it; no browser is ever downloaded), against the
console served by uvicorn on the test database.

Set EMAIL_OUTBOX_SCREENSHOTS_DIR=docs to write the README's screenshots there.
"""

from __future__ import annotations

import http.server
import math
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from tests.support.console_support import (
    PASSWORD,
    USER,
    XSS_NOTIFICATION_ID,
    XSS_SUBJECT,
    XSS_TEXT,
    Served,
    hostile_row,
    make_console,
    message_with_attachments,
    sent_row,
    unknown_row,
)
from tests.support.helpers import scalar

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright (pip) is not installed")
CHROMIUM = os.environ.get("EMAIL_OUTBOX_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(
        f"no chromium at {CHROMIUM}: install Debian's chromium package (db/ensure-server-binary.sh does)",
        allow_module_level=True,
    )
PWNED = "() => Object.keys(window).filter(k => k.startsWith('__pwned'))"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        # --no-sandbox: the tests run as root, where Chromium's own sandbox cannot start.
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def served(dsn: DatabaseDsn, tmp_path: Path) -> Iterator[Served]:
    console = make_console(dsn, tmp_path)
    with Served(console) as running:
        yield running
    console.close()


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    context = browser.new_context(
        http_credentials={"username": USER, "password": PASSWORD}, viewport={"width": 1280, "height": 900}
    )
    context.set_default_timeout(15_000)
    opened = context.new_page()
    yield opened
    context.close()


def test_without_credentials_the_browser_gets_a_401(browser: Any, served: Served) -> None:
    for credentials in (None, {"username": USER, "password": "not the password"}):
        context = browser.new_context(http_credentials=credentials)
        page = context.new_page()
        try:
            # Chromium, given a Basic challenge it has no (right) answer to, shows the 401 or stops.
            try:
                response = page.goto(served.url + "/")
            except playwright_api.Error as exc:
                assert "ERR_INVALID_AUTH_CREDENTIALS" in str(exc)
            else:
                assert response.status == 401
                assert response.headers["www-authenticate"].startswith("Basic")
                assert page.locator("#overview").count() == 0
        finally:
            context.close()


def test_log_in_read_the_overview_search_open_an_email_requeue_it_and_see_the_audit_event(
    page: Any, served: Served, repo: OutboxRepository
) -> None:
    expect = playwright_api.expect
    sent_row(repo)
    target = unknown_row(repo, to="carol@example.com", nid="order-7781:receipt")
    unknown_row(repo, to="dave@example.com", nid="order-9999:receipt")

    response = page.goto(served.url + "/")
    assert response.status == 200
    expect(page.locator('[data-status="UnknownOutcome"] .count')).to_have_text("2")
    expect(page.locator('[data-status="Sent"] .count')).to_have_text("1")
    expect(page.locator("#sent-chart rect.bar")).to_have_count(60)
    expect(page.locator('#tenants tr[data-tenant="default"] .tenant-held')).to_have_text("sending")

    page.select_option("select[name=by]", "notification_id")
    page.fill("input[name=q]", "order-7781")
    page.click("header form.search button")
    expect(page.locator("#rows tbody tr")).to_have_count(1)
    page.click("text=order-7781:receipt")
    expect(page).to_have_url(f"{served.url}/emails/{target}")
    expect(page.locator("#status")).to_have_text("UnknownOutcome")
    expect(page.locator("#requeue-form")).to_contain_text("This may send the email twice")

    page.fill("#requeue-form input[name=reason]", "no SES Send event 09:58-10:10Z")
    page.click("#requeue-form button")
    expect(page.locator("#notice")).to_contain_text("Requeued")
    expect(page.locator("#status")).to_have_text("Pending")
    last = page.locator("#events tbody tr").last
    expect(last).to_contain_text("UnknownOutcome → Pending")
    expect(last.locator(".actor")).to_have_text("alice (console)")
    expect(last).to_contain_text("requeued: no SES Send event 09:58-10:10Z")
    assert scalar(repo, "SELECT status FROM email_delivery_attempts WHERE id = %s", (target,)) == "Pending"


def test_the_overview_refreshes_itself(page: Any, served: Served, repo: OutboxRepository) -> None:
    page.goto(served.url + "/")
    count = page.locator('[data-status="Pending"] .count')
    playwright_api.expect(count).to_have_text("0")
    repo.enqueue("live-refresh-1", "live@example.com", "live", text_body="x")
    # htmx (vendored, allowed by the CSP as a script of our own origin) swaps the panel within 5 s.
    playwright_api.expect(count).to_have_text("1", timeout=12_000)


def test_script_payloads_in_subject_body_and_notification_id_never_run(
    page: Any, served: Served, repo: OutboxRepository
) -> None:
    attempt_id = hostile_row(repo)
    requests: list[str] = []
    page.on("requestfinished", lambda request: requests.append(request.url))
    blocked: list[str] = []
    page.on("requestfailed", lambda request: blocked.append(f"{request.url} {request.failure}"))
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    page.goto(f"{served.url}/emails/{attempt_id}")
    frame = page.frame_locator("#html-body")
    playwright_api.expect(frame.locator("#inner")).to_have_text("Hello from the HTML body")
    # The texts are shown as text, exactly as stored.
    playwright_api.expect(page.locator("#fields")).to_contain_text(XSS_NOTIFICATION_ID)
    playwright_api.expect(page.locator("#fields")).to_contain_text(XSS_SUBJECT)
    playwright_api.expect(page.locator("#text-body")).to_have_text(XSS_TEXT)
    assert page.evaluate(PWNED) == []
    inner = next(f for f in page.frames if f.url.endswith(f"/emails/{attempt_id}/html"))
    assert inner.evaluate(PWNED) == [], "no script ran inside the HTML body's frame"
    for path in ("/emails?status=UnknownOutcome", "/emails?by=notification_id&q=%3Cscript"):
        page.goto(served.url + path)
        playwright_api.expect(page.locator("#rows")).to_contain_text(XSS_SUBJECT)
        assert page.evaluate(PWNED) == []
    assert dialogs == []
    assert not [u for u in requests if "127.0.0.1:9/" in u], "the HTML body's remote image was not loaded"
    assert "http://127.0.0.1:9/pixel.gif csp" in blocked, "the frame's CSP blocked it"


def test_a_form_posted_from_another_origin_is_refused(
    page: Any, served: Served, repo: OutboxRepository
) -> None:
    attempt_id = unknown_row(repo)
    # Even with a valid token (say it leaked), a post from another origin is refused.
    token = served.console.settings.csrf.token(USER)
    evil = (
        f"<!doctype html><form id=f method=post action='{served.url}/emails/{attempt_id}/requeue'>"
        f"<input name=csrf_token value='{token}'><input name=reason value=pwned></form>"
        "<script>document.getElementById('f').submit()</script>"
    )

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = evil.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Evil)  # another port: another origin
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        with page.expect_response(lambda r: r.url.endswith(f"/emails/{attempt_id}/requeue")) as posted:
            page.goto(f"http://127.0.0.1:{attacker.server_address[1]}/")
        response = posted.value
        assert response.status == 403
        assert "refused: cross-site request" in response.text()
    finally:
        attacker.shutdown()
        attacker.server_close()
    assert scalar(repo, "SELECT status FROM email_delivery_attempts WHERE id = %s", (attempt_id,)) == (
        "UnknownOutcome"
    )
    assert (
        scalar(repo, "SELECT COUNT(*) FROM email_delivery_events WHERE attempt_id = %s", (attempt_id,)) == 3
    )


def test_bulk_requeue_asks_for_confirmation_in_the_browser(
    page: Any, served: Served, repo: OutboxRepository
) -> None:
    ids = [unknown_row(repo, to=f"bulk{i}@example.com") for i in range(3)]
    page.goto(served.url + "/bulk")
    page.fill("input[name=older_than]", "0s")
    page.fill("input[name=recipient_prefix]", "bulk")
    page.click("#bulk-form button")
    playwright_api.expect(page.locator("h1")).to_have_text("Requeue: 3 emails")
    playwright_api.expect(page.locator("#frozen-ids")).to_have_text(", ".join(map(str, ids)))
    page.fill("#bulk-apply input[name=reason]", "INC-123: SES outage, no Send events")
    page.click("#bulk-apply button")  # the browser refuses: the confirmation box is required
    playwright_api.expect(page.locator("h1")).to_have_text("Requeue: 3 emails")
    page.check("#bulk-apply input[name=confirm]")
    page.click("#bulk-apply button")
    playwright_api.expect(page.locator("#bulk-result")).to_have_text("3 done.")
    statuses = {scalar(repo, "SELECT status FROM email_delivery_attempts WHERE id = %s", (i,)) for i in ids}
    assert statuses == {"Pending"}


def test_screenshots_of_the_overview_and_of_one_email(
    page: Any, served: Served, repo: OutboxRepository, tmp_path: Path
) -> None:
    out = Path(os.environ.get("EMAIL_OUTBOX_SCREENSHOTS_DIR") or tmp_path)
    # An hour of sending for the chart, written directly: a daily rhythm, and a dip ten minutes long
    # 35 minutes ago (an SES incident, which also left two emails UnknownOutcome).
    per_minute = [
        0 if 25 <= ago < 35 else round(24 + 10 * math.sin(ago / 7) + (ago * 7) % 5) for ago in range(60)
    ]
    rows = [
        (f"order-{ago}-{i}:confirmation", f"customer{i}@example.com", ago * 60 + i)
        for ago, n in enumerate(per_minute)
        for i in range(n)
    ]
    cursor = repo.connection.cursor()
    cursor.executemany(
        "INSERT INTO email_delivery_attempts (notification_id, to_address, subject, text_body, status,"
        " attempt_count, max_attempts, next_attempt_at, provider_message_id, sent_at, created_at, updated_at)"
        " VALUES (%s, %s, 'Your order', 'x', 'Sent', 1, 5, UTC_TIMESTAMP(6), 'ses-1',"
        " UTC_TIMESTAMP(6) - INTERVAL %s SECOND, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
        rows,
    )
    cursor.close()
    for i in range(3):
        repo.enqueue(f"order-{2000 + i}:receipt", f"customer{i}@example.com", "Your receipt", text_body="x")
    unknown_row(repo, to="carol@example.com", nid="order-1207:refund")
    attempt_id = message_with_attachments(repo)
    claim = "3f1c0d2e9b8a4c7d"
    assert repo.try_claim(attempt_id, claim, "worker-7f9c", 120) == 1
    assert repo.finalize_unknown(attempt_id, claim, "read timeout after the request was sent") == 1
    page.goto(served.url + "/")
    playwright_api.expect(page.locator('[data-status="Sent"] .count')).to_have_text(f"{len(rows):,}")
    page.screenshot(path=str(out / "console-overview.png"), full_page=True)
    page.goto(f"{served.url}/emails/{attempt_id}")
    inner = page.frame_locator("#html-body").locator("p")
    playwright_api.expect(inner).to_have_text("The invoice is attached.")
    # A viewport as tall as the page, not full_page: Chromium paints an out-of-process frame only
    # inside the viewport.
    page.set_viewport_size({"width": 1280, "height": page.evaluate("document.body.scrollHeight")})
    playwright_api.expect(inner).to_be_visible()
    page.screenshot(path=str(out / "console-email.png"))
    for name in ("console-overview.png", "console-email.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (out / name).stat().st_size > 20_000
