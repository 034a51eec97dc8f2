"""The console's pages and actions. Each view checks its input, does its database work on a worker
thread (the connection calls block), and renders an autoescaping Jinja2 template.

Actions call the operator procedures with the console user as the actor (`alice (console)`), so the
audit event names the person beside the database account the server records.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import datetime
from importlib import resources
from typing import Any, TypeVar

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from email_outbox.console.security import body_headers
from email_outbox.db.console_reads import ConsoleReads, Overview
from email_outbox.display import age, visible, when
from email_outbox.errors import AccessDenied, InvalidInput, NotFound, OutboxError, ReadOnlyServer
from email_outbox.models import Status
from email_outbox.ses import PROVIDER

log = logging.getLogger("email_outbox.console")
T = TypeVar("T")

MAX_PAGE_SIZE = 200
MAX_SEARCH_CHARS = 320
MAX_REASON_CHARS = 2000
NOTICES = {
    "requeued": "Requeued: UnknownOutcome -> Pending. A worker will send it again.",
    "resolved-Sent": "Resolved as Sent.",
    "resolved-Failed": "Resolved as Failed.",
    "cancelled": "Cancelled: Failed (Cancelled). It will never be handed to SES.",
    "not-cancelled": "Nothing changed: the email is no longer Pending or Retrying (a worker may have started its send).",
    "unchanged": "Nothing changed: the email is no longer UnknownOutcome (someone got there first).",
    "redriven": "Redriven: Failed -> Pending with a fresh attempt budget. A worker will send it.",
    "not-redriven": "Nothing changed: the email is not Failed, or SES accepted it or may have (a MessageId, an"
    " accepting SES event, an earlier UnknownOutcome). A redrive never sends an email twice.",
    "breaker-closed": "Provider breaker closed: every worker sends again at its next claim.",
    "breaker-was-closed": "Nothing changed: the provider breaker was not open.",
}

# SES's rule for a tenant name, as the procedures check it (email_internal_check_tenant_name).
TENANT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _environment() -> Environment:
    folder = resources.files("email_outbox.console").joinpath("templates")
    env = Environment(
        loader=FileSystemLoader(str(folder)),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["v"] = lambda value: "-" if value is None else visible(str(value))
    env.filters["when"] = lambda value: when(value) if isinstance(value, datetime) else value
    env.filters["age"] = age
    return env


ENV = _environment()


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    settings = request.app.state.settings
    user = getattr(request.state, "user", "")
    context.update(
        user=user,
        csrf_token=settings.csrf.token(user),
        can_act=settings.can_act,
        can_cancel=settings.can_cancel,
        can_close_breaker=settings.can_close_breaker,
        statuses=[s.value for s in Status],
        flavour=settings.database.flavour,
    )
    return HTMLResponse(ENV.get_template(name).render(**context), status_code=status_code)


def actor(request: Request) -> str:
    return f"{request.state.user} (console)"


async def with_db(request: Request, work: Callable[[ConsoleReads], T]) -> T:
    db = request.app.state.settings.database

    def run() -> T:
        with db.session() as reads:
            return work(reads)

    return await run_in_threadpool(run)


def problem(request: Request, error: Exception) -> HTMLResponse:
    """An error the user can act on, said plainly; never a traceback."""
    if isinstance(error, NotFound):
        status, text = 404, str(error)
    elif isinstance(error, InvalidInput):
        status, text = 400, str(error)
    elif isinstance(error, AccessDenied):
        # The server's words name the account and its host: for the log, not the page.
        log.warning("the console's database account was refused: %s", error)
        status, text = (
            403,
            "the console's database account may not do this (the console's log has the details)",
        )
    elif isinstance(error, ReadOnlyServer):
        status, text = 503, str(error)
    else:
        log.error("database call failed: %s", error)
        status, text = 503, "the database did not answer in time or is unavailable; try again"
    return render(request, "message.html", status_code=status, title="Error", message=text)


# --- overview ---------------------------------------------------------------------------------------
def _chart(overview: Overview) -> dict[str, Any]:
    top = max(overview.sent_per_minute) or 1
    bars = []
    for i, n in enumerate(overview.sent_per_minute):
        height = round(n / top * 80)
        bars.append({"x": i * 6, "y": 90 - height, "h": height, "n": n, "ago": 59 - i})
    return {"bars": bars, "top": top, "total": sum(overview.sent_per_minute)}


async def _render_overview(request: Request, template: str) -> Response:
    try:
        data = await with_db(
            request, lambda r: r.overview(request.app.state.settings.overview_count_cap, PROVIDER)
        )
    except OutboxError as exc:
        return problem(request, exc)
    notice = NOTICES.get(request.query_params.get("done", ""))
    return render(request, template, o=data, chart=_chart(data), notice=notice)


async def overview(request: Request) -> Response:
    return await _render_overview(request, "overview.html")


async def overview_fragment(request: Request) -> Response:
    """The same panel alone, for htmx's 5-second refresh."""
    return await _render_overview(request, "_overview.html")


# --- lists and search -------------------------------------------------------------------------------
def _status(text: str) -> Status:
    for status in Status:
        if status.value.lower() == text.lower():
            return status
    raise InvalidInput(f"status must be one of {', '.join(s.value for s in Status)}")


async def email_list(request: Request) -> Response:
    params = request.query_params
    try:
        limit = min(max(int(params.get("limit") or request.app.state.settings.page_size), 1), MAX_PAGE_SIZE)
        q = params.get("q", "")
        by = params.get("by", "notification_id")
        cursor = params.get("cursor") or None
        priority = int(params["priority"]) if params.get("priority") else None
        if priority is not None and not 0 <= priority <= 9:
            raise InvalidInput("priority must be 0 to 9")
        tenant = params.get("tenant") or None
        if tenant is not None and not TENANT_NAME.fullmatch(tenant):
            raise InvalidInput("tenant must be 1 to 64 of A-Za-z0-9_-")
        if len(q) > MAX_SEARCH_CHARS:
            raise InvalidInput(f"search text is limited to {MAX_SEARCH_CHARS} characters")
        if by not in ("notification_id", "recipient"):
            raise InvalidInput("by must be notification_id or recipient")
        if q:
            after = None
            if cursor:
                id_text, _, value = cursor.partition(":")
                after = (value, int(id_text))
            page = await with_db(request, lambda r: r.search(by, q, after, limit))
            status = None
        else:
            status = _status(params.get("status") or Status.UNKNOWN_OUTCOME.value)
            before = int(cursor) if cursor else None
            page = await with_db(request, lambda r: r.list_status(status, before, limit, priority, tenant))
    except ValueError:
        return problem(request, InvalidInput("the page cursor or limit is not valid"))
    except OutboxError as exc:
        return problem(request, exc)
    next_query = None
    if page.next_cursor:
        next_query = {"cursor": page.next_cursor, "limit": limit}
        next_query.update({"q": q, "by": by} if q else {"status": status.value if status else ""})
        if priority is not None and not q:
            next_query["priority"] = priority
        if tenant is not None and not q:
            next_query["tenant"] = tenant
    return render(
        request,
        "list.html",
        page=page,
        status=status.value if status else None,
        q=q,
        by=by,
        priority=priority,
        tenant=tenant,
        next_query=next_query,
        limit=limit,
    )


# --- one email ----------------------------------------------------------------------------------------
async def email_page(request: Request) -> Response:
    attempt_id = int(request.path_params["attempt_id"])
    try:
        detail = await with_db(request, lambda r: r.email(attempt_id))
    except OutboxError as exc:
        return problem(request, exc)
    notice = NOTICES.get(request.query_params.get("done", ""))
    return render(request, "email.html", e=detail, f=detail.fields, notice=notice)


async def email_html(request: Request) -> Response:
    attempt_id = int(request.path_params["attempt_id"])
    try:
        html = await with_db(request, lambda r: r.html_body(attempt_id))
    except OutboxError as exc:
        return problem(request, exc)
    if html is None:
        return problem(request, NotFound("this email has no HTML body"))
    response = HTMLResponse(html)
    body_headers(response.headers)
    return response


def reason_from(form: Any) -> str:
    reason = str(form.get("reason") or "").strip()
    if not reason:
        raise InvalidInput("a reason is required: it goes into the audit event")
    if len(reason) > MAX_REASON_CHARS:
        raise InvalidInput(f"the reason is limited to {MAX_REASON_CHARS} characters")
    return reason


def refuse_read_only(request: Request) -> Response | None:
    if not request.app.state.settings.can_act:
        return render(
            request,
            "message.html",
            status_code=403,
            title="Read-only",
            message="this console is read-only: its database account may not requeue or resolve",
        )
    return None


async def _reasoned_action(
    request: Request,
    verb: str,
    done: tuple[str, str],
    act: Callable[[ConsoleReads, int, str, str], int],
    refuse: Callable[[Request], Response | None] = refuse_read_only,
) -> Response:
    """One email's action with a reason (requeue, redrive, cancel): refused where this console may
    not act, the reason checked, the procedure called with the signed-in user as actor, and back to
    the email's page."""
    refused = refuse(request)
    if refused:
        return refused
    attempt_id = int(request.path_params["attempt_id"])
    form = await request.form()
    try:
        reason = reason_from(form)
        who = actor(request)
        affected = await with_db(request, lambda r: act(r, attempt_id, who, reason))
    except OutboxError as exc:
        return problem(request, exc)
    log.info("%s by %s: email %s", verb, who, attempt_id)
    return _back(attempt_id, done[0] if affected else done[1])


async def requeue(request: Request) -> Response:
    return await _reasoned_action(request, "requeued", ("requeued", "unchanged"), ConsoleReads.requeue)


async def resolve(request: Request) -> Response:
    refused = refuse_read_only(request)
    if refused:
        return refused
    attempt_id = int(request.path_params["attempt_id"])
    form = await request.form()
    try:
        outcome = str(form.get("outcome") or "")
        if outcome not in ("Sent", "Failed"):
            raise InvalidInput("outcome must be Sent or Failed")
        reason = reason_from(form)
        message_id = str(form.get("message_id") or "").strip() or None
        if message_id and outcome != "Sent":
            raise InvalidInput("a MessageId goes only with Sent")
        who = actor(request)
        affected = await with_db(request, lambda r: r.resolve(attempt_id, outcome, who, reason, message_id))
    except OutboxError as exc:
        return problem(request, exc)
    log.info("resolved as %s by %s: email %s", outcome, who, attempt_id)
    return _back(attempt_id, f"resolved-{outcome}" if affected else "unchanged")


async def redrive(request: Request) -> Response:
    return await _reasoned_action(request, "redriven", ("redriven", "not-redriven"), ConsoleReads.redrive)


def _refuse_cancel(request: Request) -> Response | None:
    if not request.app.state.settings.can_cancel:
        return render(
            request,
            "message.html",
            status_code=403,
            title="Read-only",
            message="this console may not cancel: read-only, or its database account lacks email_cancel_email",
        )
    return None


async def cancel(request: Request) -> Response:
    """Cancel a Pending or Retrying email (email_cancel_email, by row id): audited with the signed-in
    user and the reason."""
    return await _reasoned_action(
        request, "cancelled", ("cancelled", "not-cancelled"), ConsoleReads.cancel, _refuse_cancel
    )


async def close_breaker(request: Request) -> Response:
    """Close the provider breaker for every worker now (email_breaker_close), logged with the signed-in
    user and the reason: an operator who knows SES is back does not wait for the next probe."""
    if not request.app.state.settings.can_close_breaker:
        return render(
            request,
            "message.html",
            status_code=403,
            title="Read-only",
            message="this console may not close the breaker: read-only, or its account lacks email_breaker_close",
        )
    form = await request.form()
    try:
        reason = reason_from(form)
        who = actor(request)
        closed = await with_db(request, lambda r: r.close_breaker(PROVIDER, who, reason))
    except OutboxError as exc:
        return problem(request, exc)
    log.info("provider breaker %s by %s", "closed" if closed else "already closed", who)
    return RedirectResponse(f"/?done={'breaker-closed' if closed else 'breaker-was-closed'}", status_code=303)


def _back(attempt_id: int, done: str) -> RedirectResponse:
    return RedirectResponse(f"/emails/{attempt_id}?done={done}", status_code=303)
