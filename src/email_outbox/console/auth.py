"""Who is asking: the console's three ways to name the user of a request.

- `BasicAuth`: HTTP Basic against the users file (the default, and required unless one of the others
  is chosen). A verified name and password are remembered for a few minutes by their SHA-256, so
  the slow scrypt runs once per user per few minutes, not once per request.
- `TrustedHeader`: a header set by an SSO proxy (oauth2-proxy's X-Forwarded-User), honoured only when
  the TCP peer is inside one of the trusted proxy networks; any other peer is refused.
- `NoAuth`: `--insecure-no-auth`, allowed on a loopback address only (checked by the caller).

Each returns the user's name or None (refused).
"""

from __future__ import annotations

import base64
import binascii
import getpass
import hashlib
import ipaddress
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from starlette.requests import Request

from email_outbox.console.users import USER_NAME, UsersFile

REALM = "email-outbox console"


class Authenticator:
    # Sent with a 401, so that a browser asks for a name and password.
    challenge: str | None = None

    def user(self, request: Request) -> str | None:
        raise NotImplementedError


@dataclass
class BasicAuth(Authenticator):
    users: UsersFile
    remember_seconds: float = 300.0
    challenge: str | None = f'Basic realm="{REALM}", charset="UTF-8"'
    _verified: dict[bytes, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def user(self, request: Request) -> str | None:
        credentials = basic_credentials(request)
        if credentials is None:
            return None
        name, password = credentials
        return name if self.remembered(name, password) or self.verify(name, password) else None

    def remembered(self, name: str, password: str) -> bool:
        """Whether this name and password were verified within the last few minutes (cheap)."""
        with self._lock:
            until = self._verified.get(_remember_key(name, password))
        return until is not None and until > time.monotonic()

    def verify(self, name: str, password: str) -> bool:
        """The slow check against the users file; a success is remembered."""
        if not self.users.verify(name, password):
            return False
        with self._lock:
            if len(self._verified) > 10_000:
                self._verified.clear()
            self._verified[_remember_key(name, password)] = time.monotonic() + self.remember_seconds
        return True


def _remember_key(name: str, password: str) -> bytes:
    return hashlib.sha256(f"{name}:{password}".encode()).digest()


def basic_credentials(request: Request) -> tuple[str, str] | None:
    """The user name and password of an HTTP Basic Authorization header; None without a usable one."""
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, sep, password = decoded.partition(":")
    return (name, password) if sep and USER_NAME.match(name) else None


@dataclass
class TrustedHeader(Authenticator):
    header: str
    proxies: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]

    def user(self, request: Request) -> str | None:
        peer = request.client.host if request.client else None
        if peer is None or not peer_in(peer, self.proxies):
            return None
        # Sent twice, the header would name whoever comes first to one reader and last to another.
        values = request.headers.getlist(self.header)
        if len(values) != 1:
            return None
        name = values[0].strip()
        return name if USER_NAME.match(name) else None


@dataclass
class NoAuth(Authenticator):
    name: str = field(default_factory=lambda: f"{_login_name()}-noauth")

    def user(self, request: Request) -> str | None:
        return self.name


def _login_name() -> str:
    try:
        name = getpass.getuser()
    except Exception:
        name = "console"
    return name if USER_NAME.match(name) else "console"


def peer_in(peer: str, networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address.version == net.version and address in net for net in networks)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
