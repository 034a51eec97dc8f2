"""The console and issue 26: the priority in the lists and its filter (and issue 37's tenant), the cancel action on Pending and
Retrying emails (CSRF, a reason, the audit event naming the console user), and the email page saying
when an email was never handed to SES (Expired, Cancelled)."""

from __future__ import annotations

import json
from datetime import timedelta

from starlette.testclient import TestClient

from email_outbox.db.repository import OutboxRepository
from tests.conftest import db_now, set_clock
from tests.console.test_console import client, console, csrf, last_event, post, status_of
from tests.support.console_support import sent_row
from tests.support.helpers import enqueue_many

__all__ = ["client", "console"]  # the fixtures this module uses


def test_lists_show_the_priority_and_filter_by_it(client: TestClient, repo: OutboxRepository) -> None:
    message = {"to": ["a@example.com"], "subject": "reset", "text": "t", "priority": 9}
    urgent = repo.enqueue_message("urgent", json.dumps(message)).attempt_id
    enqueue_many(repo, 2, prefix="digest")
    page = client.get("/emails?status=Pending").text
    assert 'id="priority-filter"' in page and '<td class="priority">9</td>' in page
    filtered = client.get("/emails?status=Pending&priority=9").text
    assert f'href="/emails/{urgent}"' in filtered and "digest-0" not in filtered
    assert "Pending, priority 9" in filtered
    assert client.get("/emails?status=Pending&priority=12").status_code == 400


def test_lists_show_the_tenant_and_filter_by_it(client: TestClient, repo: OutboxRepository) -> None:
    """Issue 37: the tenant column and its filter."""
    repo.tenant_add("news", {"accounts": ["*"]}, "ops", "the newsletter")
    message = {"to": ["a@example.com"], "subject": "weekly", "text": "t", "tenant": "news"}
    weekly = repo.enqueue_message("weekly", json.dumps(message)).attempt_id
    enqueue_many(repo, 2, prefix="plain")
    page = client.get("/emails?status=Pending").text
    assert '<td class="tenant">news</td>' in page and '<td class="tenant">default</td>' in page
    filtered = client.get("/emails?status=Pending&tenant=news").text
    assert f'href="/emails/{weekly}"' in filtered and "plain-0" not in filtered
    assert "Pending, tenant news" in filtered
    assert client.get("/emails?status=Pending&tenant=no%20such").status_code == 400


def test_cancel_goes_through_the_procedure_with_csrf_and_a_reason(
    client: TestClient, repo: OutboxRepository
) -> None:
    (attempt_id,) = enqueue_many(repo, 1, prefix="order")
    page = client.get(f"/emails/{attempt_id}").text
    assert 'id="cancel-form"' in page
    token = csrf(client, f"/emails/{attempt_id}")
    path = f"/emails/{attempt_id}/cancel"
    assert post(client, path, {"csrf_token": token, "reason": ""}).status_code == 400
    assert post(client, path, {"reason": "no token"}).status_code == 403
    assert status_of(repo, attempt_id) == "Pending", "nothing changed without a reason or the token"
    response = post(client, path, {"csrf_token": token, "reason": "order cancelled"})
    assert (
        response.status_code == 303 and response.headers["location"] == f"/emails/{attempt_id}?done=cancelled"
    )
    assert status_of(repo, attempt_id) == "Failed"
    actor, _, detail = last_event(repo, attempt_id)
    assert (actor, detail) == ("alice (console)", "cancelled: order cancelled")
    after = client.get(f"/emails/{attempt_id}?done=cancelled").text
    assert "It will never be handed to SES" in after and 'id="unsent"' in after and "Cancelled" in after
    assert 'id="cancel-form"' not in after, "no cancel on a terminal row"
    again = post(client, path, {"csrf_token": token, "reason": "twice"})
    assert again.headers["location"].endswith("done=not-cancelled")


def test_no_cancel_for_what_may_have_been_sent(client: TestClient, repo: OutboxRepository) -> None:
    attempt_id = sent_row(repo)
    assert 'id="cancel-form"' not in client.get(f"/emails/{attempt_id}").text
    token = csrf(client)
    response = post(client, f"/emails/{attempt_id}/cancel", {"csrf_token": token, "reason": "late"})
    assert response.headers["location"].endswith("done=not-cancelled")
    assert status_of(repo, attempt_id) == "Sent"


def test_the_email_page_says_an_expired_email_was_never_sent(
    client: TestClient, repo: OutboxRepository
) -> None:
    expires = (db_now(repo) + timedelta(seconds=30)).isoformat() + "Z"
    message = {"to": ["a@example.com"], "subject": "code", "text": "t", "expires_at": expires}
    attempt_id = repo.enqueue_message("otp", json.dumps(message)).attempt_id
    set_clock(repo, db_now(repo) + timedelta(seconds=31))
    assert repo.sweep(10) == (0, 1)
    set_clock(repo, None)
    page = client.get(f"/emails/{attempt_id}").text
    assert "Never handed to SES: Expired (not sent by its expires_at" in page
