"""What makes the console safe as a door: the response headers every page carries, the stricter ones
of the HTML-body frame, the CSRF token, and the same-origin check of every state-changing request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.datastructures import MutableHeaders
from starlette.requests import Request

# No inline script or style anywhere, nothing remote: htmx and the stylesheet come from /static.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self';"
    " frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
# The email's own HTML, shown in a sandboxed frame of the console: no script, no remote load of any
# kind (a tracking pixel would tell the sender the email was opened), its inline styles only.
BODY_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; font-src data:; form-action 'none';"
    " base-uri 'none'; sandbox; frame-ancestors 'self'"
)


def page_headers(headers: MutableHeaders) -> None:
    headers["Content-Security-Policy"] = PAGE_CSP
    headers["X-Frame-Options"] = "DENY"
    headers["X-Content-Type-Options"] = "nosniff"
    # same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on same-origin POSTs.
    headers["Referrer-Policy"] = "same-origin"
    headers["Cross-Origin-Opener-Policy"] = "same-origin"
    headers["Cross-Origin-Resource-Policy"] = "same-origin"
    headers["Permissions-Policy"] = "camera=(), microphone=(), geolocation=(), payment=()"
    headers.setdefault("Cache-Control", "no-store")


def body_headers(headers: MutableHeaders) -> None:
    page_headers(headers)
    headers["Content-Security-Policy"] = BODY_CSP
    headers["X-Frame-Options"] = "SAMEORIGIN"


class CsrfTokens:
    """A token per user, an HMAC under a secret the process draws at start: a page of another origin
    can neither read it nor compute it. It changes when the console restarts (reload the page)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def token(self, user: str) -> str:
        return hmac.new(self._secret, b"csrf\0" + user.encode("utf-8"), hashlib.sha256).hexdigest()

    def valid(self, user: str, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(self.token(user), str(token))

    def sign(self, *parts: str) -> str:
        """A signature only this process can make: unlike a CSRF token, its key is never on a page."""
        return hmac.new(self._secret, "\0".join(("sign", *parts)).encode("utf-8"), hashlib.sha256).hexdigest()


def cross_origin_reason(request: Request, public_origins: frozenset[str]) -> str | None:
    """Why a state-changing request is refused as cross-site, or None for a same-origin one. A
    browser sends Origin (and Sec-Fetch-Site) with every POST; a request with neither is refused."""
    site = request.headers.get("sec-fetch-site")
    origin = request.headers.get("origin")
    if site is not None and site != "same-origin":
        return f"Sec-Fetch-Site is {site!r}"
    if origin is None:
        if site is None:
            return "no Origin or Sec-Fetch-Site header"
        return None
    own = {f"{request.url.scheme}://{request.headers.get('host', '')}".lower(), *public_origins}
    if origin == "null" or origin.lower() not in own:
        return "Origin is another site"
    return None
