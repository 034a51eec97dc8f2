"""The console's Starlette application: routes, the guard every request passes (who, CSRF, origin,
headers), and the pages. `create_app(settings)` is the one entry point.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any
from urllib.parse import urlencode

import anyio
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from email_outbox.console import bulk, views
from email_outbox.console.auth import Authenticator, BasicAuth, basic_credentials
from email_outbox.console.login_limit import FailedLogins, client_address
from email_outbox.console.pool import ConsoleDatabase
from email_outbox.console.security import CsrfTokens, cross_origin_reason, page_headers

log = logging.getLogger("email_outbox.console")


@dataclass
class ConsoleSettings:
    database: ConsoleDatabase
    authenticator: Authenticator
    # Actions off even for an account that may run them.
    read_only: bool = False
    # Origins besides the request's own that a form may be posted from (a TLS-terminating proxy's).
    public_origins: frozenset[str] = frozenset()
    # Host headers the console answers (lower case, with the port); None: any. On a loopback address
    # it must be set: a page whose DNS name is rebound to 127.0.0.1 is otherwise "same-origin".
    allowed_hosts: frozenset[str] | None = None
    page_size: int = 50
    # The overview counts each status up to this many rows and shows "N+" beyond.
    overview_count_cap: int = 100_000
    # The most rows one bulk action may touch.
    bulk_cap: int = 500
    csrf: CsrfTokens = field(default_factory=CsrfTokens)
    failures: FailedLogins = field(default_factory=lambda: FailedLogins())
    # The TLS proxy in front (--trusted-proxy): failed logins count per client address it reports.
    trusted_proxies: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network] = ()
    # Password checks running at once: each scrypt check at N = 2^17 holds 128 MiB.
    password_checks: anyio.Semaphore = field(default_factory=lambda: anyio.Semaphore(MAX_PASSWORD_CHECKS))
    # Tries from a client past its limits: one at a time for the whole console.
    over_limit_lane: anyio.Lock = field(default_factory=anyio.Lock)

    @property
    def can_act(self) -> bool:
        return self.database.can_act and not self.read_only

    @property
    def can_cancel(self) -> bool:
        return self.database.can_cancel and not self.read_only

    @property
    def can_close_breaker(self) -> bool:
        return self.database.can_close_breaker and not self.read_only


# At most this many scrypt checks at once (128 MiB each), however many requests arrive.
MAX_PASSWORD_CHECKS = 2
# How long a login waits for a password check before it is answered 503 (retry).
PASSWORD_CHECK_WAIT_SECONDS = 10.0

# Forms carry a reason and at most --bulk-cap ids: far below this.
MAX_FORM_BYTES = 256 * 1024


STATIC = {
    "htmx.min.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}


def _static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in STATIC:
        return PlainTextResponse("not found", status_code=404)
    content = resources.files("email_outbox.console").joinpath("static", name).read_bytes()
    return Response(content, media_type=STATIC[name], headers={"Cache-Control": "max-age=3600"})


class Guard(BaseHTTPMiddleware):
    """Every request: a user (401 otherwise), and for a POST a same-origin request with the user's
    CSRF token (403 otherwise). Every response: the security headers."""

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        settings: ConsoleSettings = request.app.state.settings
        refusal = await self.refusal(request, settings)
        if refusal is not None:
            response = refusal
        else:
            response = await call_next(request)
        if request.url.path.endswith("/html") and response.status_code == 200:
            pass  # the frame's own, stricter headers are set by its view
        else:
            page_headers(response.headers)
        return response

    @staticmethod
    async def refusal(request: Request, settings: ConsoleSettings) -> Response | None:
        """None, with request.state.user set, for a request that may go on; else the refusal."""
        host = request.headers.get("host", "").lower()
        if settings.allowed_hosts is not None and host not in settings.allowed_hosts:
            return PlainTextResponse(
                "refused: this console is not served under that host name", status_code=421
            )
        user = await _authenticated_user(request, settings)
        if isinstance(user, Response):
            return user
        if user is None:
            if settings.authenticator.challenge:
                return PlainTextResponse(
                    "authentication required",
                    status_code=401,
                    headers={"WWW-Authenticate": settings.authenticator.challenge},
                )
            return PlainTextResponse(
                "refused: not from a trusted proxy, or no valid user header", status_code=403
            )
        request.state.user = user
        if request.method in ("GET", "HEAD"):
            return None
        reason = cross_origin_reason(request, settings.public_origins)
        if reason is not None:
            log.warning("refused a cross-site %s %s: %s", request.method, request.url.path, reason)
            return PlainTextResponse(f"refused: cross-site request ({reason})", status_code=403)
        length = request.headers.get("content-length", "")
        if not length.isdigit():
            return PlainTextResponse("refused: a form needs a Content-Length", status_code=411)
        if int(length) > MAX_FORM_BYTES:
            return PlainTextResponse("refused: the form is too large", status_code=413)
        # Counted as it arrives, whatever Content-Length said (a chunked body can follow a small one).
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_FORM_BYTES:
                return PlainTextResponse("refused: the form is too large", status_code=413)
        request._body = bytes(body)  # cached, so the view reads the same form again
        form = await request.form()
        if not settings.csrf.valid(user, str(form.get("csrf_token") or "")):
            return PlainTextResponse(
                "refused: missing or stale csrf_token (reload the page)", status_code=403
            )
        return None


async def _authenticated_user(request: Request, settings: ConsoleSettings) -> str | Response | None:
    """The request's user, None (not authenticated), or a refusal. HTTP Basic goes through the limiter:
    a try counts against its client from its start; within the limits it is checked as usual, past
    them it waits for the one over-limit check at a time, and a correct password still gets in."""
    authenticator = settings.authenticator
    if not isinstance(authenticator, BasicAuth):
        return authenticator.user(request)
    credentials = basic_credentials(request)
    if credentials is None:
        return None
    name, password = credentials
    if authenticator.remembered(name, password):
        return name
    peer = request.client.host if request.client else ""
    client = client_address(peer, request.headers.getlist("x-forwarded-for"), settings.trusted_proxies)
    within = settings.failures.start(client, name)
    try:
        with anyio.fail_after(PASSWORD_CHECK_WAIT_SECONDS):
            if not within:
                await settings.over_limit_lane.acquire()
            try:
                await settings.password_checks.acquire()
            except BaseException:
                if not within:
                    settings.over_limit_lane.release()
                raise
    except TimeoutError:
        return PlainTextResponse("busy checking passwords: try again in a moment", status_code=503)
    try:
        # A deliberately slow hash: off the event loop.
        correct = await run_in_threadpool(authenticator.verify, name, password)
    finally:
        settings.password_checks.release()
        if not within:
            settings.over_limit_lane.release()
    if correct:
        settings.failures.succeeded(client, name)
        return name
    if not within:
        return PlainTextResponse("too many failed logins from your address: wait a minute", status_code=429)
    return None


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("console request failed: %s %s", request.method, request.url.path, exc_info=exc)
    response = HTMLResponse(
        "<!doctype html><title>error</title><p>Something went wrong; the console's log has the details.</p>",
        status_code=500,
    )
    page_headers(response.headers)
    return response


def create_app(settings: ConsoleSettings) -> Starlette:
    routes = [
        Route("/", views.overview),
        Route("/fragments/overview", views.overview_fragment),
        Route("/emails", views.email_list),
        Route("/emails/{attempt_id:int}", views.email_page),
        Route("/emails/{attempt_id:int}/html", views.email_html),
        Route("/emails/{attempt_id:int}/requeue", views.requeue, methods=["POST"]),
        Route("/emails/{attempt_id:int}/resolve", views.resolve, methods=["POST"]),
        Route("/emails/{attempt_id:int}/redrive", views.redrive, methods=["POST"]),
        Route("/emails/{attempt_id:int}/cancel", views.cancel, methods=["POST"]),
        Route("/breaker/close", views.close_breaker, methods=["POST"]),
        Route("/bulk", bulk.bulk_form),
        Route("/bulk/preview", bulk.bulk_preview, methods=["POST"]),
        Route("/bulk/apply", bulk.bulk_apply, methods=["POST"]),
        Route("/static/{name}", _static),
    ]
    app = Starlette(
        debug=False,
        routes=routes,
        middleware=[Middleware(Guard)],
        exception_handlers={Exception: _server_error, 500: _server_error},
    )
    app.state.settings = settings
    return app


def redirect(path: str, **query: Any) -> RedirectResponse:
    target = path + ("?" + urlencode(query) if query else "")
    return RedirectResponse(target, status_code=303)
