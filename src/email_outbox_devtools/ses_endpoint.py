"""A local SESv2-compatible HTTP endpoint: a real HTTP peer for boto3, with faults on demand.

It implements SendEmail (POST /v2/email/outbound-emails, with TenantName), GetTenant (POST
/v2/email/tenants/get; a tenant's sends refused with SendingPausedException while it is paused) and
GetAccount (GET /v2/email/account), holds
sends to the account's quota like SES (email_outbox_devtools.ses_quota), records every message it accepts in full (with
its EmailTags, so tests count sends per outbox id), and injects faults by rule: latency, throttling,
5xx, permanent rejection, account problems, a read timeout after accepting (the message counts as
sent but the client never hears), connection resets before or after accepting, a 200 without a
MessageId, and an error status with no SES error in it (a load balancer's HTML page).

Control, for tests in other processes: GET /_control/accepted, PUT /_control/faults (a JSON list of
rules, replacing the current ones), POST /_control/reset, POST /_control/release (let held sends go),
GET and PUT /_control/quota (the account quota, its throttled count, a sandbox account; see
ses_quota), GET and PUT /_control/outage ({"kind": "503"}, {"kind": "refused"}, {"kind": null} ends it).
The control paths are served on the endpoint's port, and on a control port of their own when one is
asked for (`control_port`): a "refused" outage closes the endpoint's port, so only the control port
can end it. Every control request carries `Authorization: Bearer TOKEN` (SesEndpoint.control_token,
generated at start unless one is given; 401 without it): anyone on the machine reaches loopback, and
the control paths read every message accepted and change what the endpoint does. The SES paths check
only that a request is signed, as SES checks its SigV4 signature: any credentials will do, as against
any local stand-in for SES.

An outage, in this process (SesEndpoint.outage): `"503"` answers every SendEmail and GetAccount 503
ServiceUnavailable (the whole endpoint is down; a fault rule fails chosen sends only, and an "error"
rule without `match` fails every SendEmail while GetAccount still answers: SendEmail alone down);
`"refused"` stops listening and closes every idle connection, so a client's next request meets a
refused connection; `None` ends it. `requests_between(start, end)` counts the
SendEmail requests that reached the endpoint (a refused connection never does).

Run standalone: python -m email_outbox_devtools.ses_endpoint --port 4579 [--control-port 4580]
--control-token-file PATH (the token is written there, mode 0600, not printed).
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import json
import os
import random
import secrets
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from email_outbox_devtools.ses_quota import AccountQuota

SEND_EMAIL_PATH = "/v2/email/outbound-emails"
GET_ACCOUNT_PATH = "/v2/email/account"
GET_TENANT_PATH = "/v2/email/tenants/get"
CONTROL_PREFIX = "/_control/"
# SESv2's tenant sending statuses (GetTenant SendingStatus).
TENANT_STATUSES = ("ENABLED", "REINSTATED", "DISABLED")

FAULT_KINDS = (
    "latency",  # sleep `seconds`, then answer normally
    "throttle",  # 429 TooManyRequestsException
    "error",  # `status` with error `code` (default 500 InternalFailure)
    "reject",  # 400 MessageRejected
    "account",  # 400 with `code` (default SendingPausedException)
    "timeout_after_accept",  # record the message, then say nothing for `seconds` and close
    "reset_after_accept",  # record the message, then reset the connection
    "reset_before_accept",  # reset the connection without recording
    "hold_after_accept",  # record the message, then answer 200 only once released (or after `seconds`)
    "no_message_id",  # record the message, then answer 200 with an empty JSON object
    "bare_error",  # `status` with an HTML body and no error type, as a load balancer in front answers
)


@dataclass
class FaultRule:
    kind: str
    remaining: int | None = None  # None: every matching request
    probability: float = 1.0
    match: str | None = None  # substring of the recipient address
    seconds: float = 0.0
    status: int = 500
    code: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; one of {', '.join(FAULT_KINDS)}")


@dataclass
class AcceptedMessage:
    message_id: str
    to: list[str]
    from_address: str | None
    subject: str | None
    text: str | None
    html: str | None
    tags: dict[str, str]
    configuration_set: str | None
    accepted_at: float
    # SendEmail's TenantName, None when the send named no SES tenant.
    tenant_name: str | None = None
    # The whole SendEmail request as it arrived (attachments' RawContent base64, as botocore sends it),
    # so tests compare every recipient, header, tag and attachment byte with what was enqueued.
    request: dict[str, Any] = field(default_factory=dict)

    @property
    def outbox_id(self) -> str | None:
        return self.tags.get("outbox_id")


@dataclass
class EndpointState:
    rules: list[FaultRule] = field(default_factory=list)
    accepted: list[AcceptedMessage] = field(default_factory=list)
    # Accepted messages whose 200 is being held back right now (hold_after_accept).
    holding: list[AcceptedMessage] = field(default_factory=list)
    requests: int = 0
    # When each SendEmail request arrived (time.time()), for counting the calls an outage saw.
    request_times: list[float] = field(default_factory=list)
    # Open client connections, so an outage can close them (a keep-alive connection would outlive it).
    connections: set[socket.socket] = field(default_factory=set)
    reject_prefix: str = "reject"
    lock: threading.Lock = field(default_factory=threading.Lock)
    released: threading.Event = field(default_factory=threading.Event)
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    quota: AccountQuota = field(default_factory=AccountQuota)
    # Set by SesEndpoint: start, change or end an outage (PUT /_control/outage); the current one.
    set_outage: Callable[[str | None], None] | None = None
    outage: Callable[[], str | None] = lambda: None
    # True where a "refused" outage may be started from: a control port of its own stays open.
    can_refuse: bool = False
    # What every control request's `Authorization: Bearer` must carry.
    control_token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    # SES tenants this endpoint knows: name -> SendingStatus (GetTenant). A send naming a DISABLED
    # tenant, or one in sending_paused, is refused with 400 SendingPausedException (never recorded).
    tenants: dict[str, str] = field(default_factory=dict)
    sending_paused: set[str] = field(default_factory=set)

    def pick_rule(self, recipient: str) -> FaultRule | None:
        with self.lock:
            self.requests += 1
            self.request_times.append(time.time())
            for rule in self.rules:
                if rule.match is not None and rule.match not in recipient:
                    continue
                if rule.remaining is not None and rule.remaining <= 0:
                    continue
                if rule.probability < 1.0 and self.rng.random() >= rule.probability:
                    continue
                if rule.remaining is not None:
                    rule.remaining -= 1
                return rule
        return None

    def record(self, body: dict[str, Any]) -> AcceptedMessage:
        tags = {t.get("Name", ""): t.get("Value", "") for t in body.get("EmailTags", [])}
        simple = body.get("Content", {}).get("Simple", {}) or {}
        subject = (simple.get("Subject") or {}).get("Data")
        parts = simple.get("Body") or {}
        message = AcceptedMessage(
            message_id=f"local-{uuid.uuid4()}",
            to=list(body.get("Destination", {}).get("ToAddresses", [])),
            from_address=body.get("FromEmailAddress"),
            subject=subject,
            text=(parts.get("Text") or {}).get("Data"),
            html=(parts.get("Html") or {}).get("Data"),
            tags=tags,
            configuration_set=body.get("ConfigurationSetName"),
            accepted_at=time.time(),
            tenant_name=body.get("TenantName"),
            request=body,
        )
        with self.lock:
            self.accepted.append(message)
        self.quota.accepted(message.accepted_at)
        return message


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in two writes; with Nagle on, the body waits for the client's delayed
        # ACK (40 ms on Linux), which capped every sender at about 20 requests/s per connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if not self.server.is_control:
            with self.server.state.lock:
                self.server.state.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.state.lock:
            self.server.state.connections.discard(self.connection)
        super().finish()

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: str, message: str) -> None:
        self._json(status, {"message": message}, {"x-amzn-ErrorType": code})

    def _bare_error(self, status: int) -> None:
        data = b"<html><body><h1>%d</h1></body></html>" % status
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reset(self) -> None:
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _control_refused(self) -> bool:
        """A control path without the bearer token: answered 401 (and the connection closed, its body
        unread) here."""
        if not self.path.startswith(CONTROL_PREFIX):
            return False
        scheme, _, given = (self.headers.get("Authorization") or "").partition(" ")
        expected = self.server.state.control_token
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode()):
            return False
        self.close_connection = True
        self._json(
            401,
            {"message": "the control API needs Authorization: Bearer TOKEN (SesEndpoint.control_token)"},
            {"WWW-Authenticate": 'Bearer realm="ses-endpoint-control"', "Connection": "close"},
        )
        return True

    def do_GET(self) -> None:
        if self._control_refused():
            return
        state = self.server.state
        if self.path == "/_control/accepted":
            with state.lock:
                payload = [asdict(m) for m in state.accepted]
            self._json(200, payload)
        elif self.path == "/_control/health":
            self._json(200, {"ok": True, "requests": state.requests})
        elif self.path == "/_control/quota":
            self._json(200, state.quota.describe())
        elif self.path == "/_control/outage":
            self._json(200, {"kind": state.outage()})
        elif self.path == GET_ACCOUNT_PATH:
            if state.outage() == "503":  # an outage of the endpoint: every call, not only sends
                self._error(503, "ServiceUnavailable", "Service Unavailable")
            elif "Authorization" not in self.headers:
                self._error(403, "AccessDeniedException", "request is not signed")
            elif state.quota.get_account == "deny":
                self._error(403, "AccessDeniedException", "User is not authorized to perform: ses:GetAccount")
            else:
                self._json(200, state.quota.get_account_answer())
        else:
            self._error(404, "NotFoundException", f"no route {self.path}")

    def _get_tenant(self, raw: bytes) -> None:
        """SESv2 GetTenant: POST {"TenantName": ...} -> {"Tenant": {..., "SendingStatus": ...}}."""
        if "Authorization" not in self.headers:
            self._error(403, "AccessDeniedException", "request is not signed")
            return
        try:
            name = str(json.loads(raw or b"{}").get("TenantName") or "")
        except ValueError:
            self._error(400, "BadRequestException", "body is not JSON")
            return
        with self.server.state.lock:
            status = self.server.state.tenants.get(name)
        if status is None:
            self._error(404, "NotFoundException", f"tenant {name} does not exist")
            return
        self._json(
            200,
            {
                "Tenant": {
                    "TenantName": name,
                    "TenantId": f"tn-{name}",
                    "TenantArn": f"arn:aws:ses:us-east-1:000000000000:tenant/{name}/tn-{name}",
                    "CreatedTimestamp": 0,
                    "Tags": [],
                    "SendingStatus": status,
                }
            },
        )

    def do_PUT(self) -> None:
        if self._control_refused():
            return
        if self.path == "/_control/quota":
            try:
                self.server.state.quota.configure(json.loads(self._body() or b"{}"))
            except (ValueError, TypeError) as exc:
                self._error(400, "BadRequestException", str(exc))
                return
            self._json(200, self.server.state.quota.describe())
            return
        if self.path == "/_control/outage":
            self._put_outage()
            return
        if self.path != "/_control/faults":
            self._error(404, "NotFoundException", f"no route {self.path}")
            return
        rules = [FaultRule(**r) for r in json.loads(self._body() or b"[]")]
        with self.server.state.lock:
            self.server.state.rules = rules
        self._json(200, {"rules": len(rules)})

    def _put_outage(self) -> None:
        state = self.server.state
        try:
            kind = json.loads(self._body() or b"{}").get("kind")
        except (ValueError, AttributeError):
            self._error(
                400, "BadRequestException", 'send {"kind": "503"}, {"kind": "refused"} or {"kind": null}'
            )
            return
        if kind not in (*OUTAGE_KINDS, None) or state.set_outage is None:
            self._error(400, "BadRequestException", f"kind must be one of {', '.join(OUTAGE_KINDS)} or null")
            return
        if kind == "refused" and not state.can_refuse:
            self._error(
                409, "ConflictException", "a refused outage needs the control port (SesEndpoint control_port)"
            )
            return
        state.set_outage(kind)
        self._json(200, {"kind": kind})

    def do_POST(self) -> None:
        if self._control_refused():
            return
        state = self.server.state
        raw = self._body()
        if self.path == "/_control/reset":
            with state.lock:
                state.rules, state.accepted, state.requests, state.request_times = [], [], 0, []
                state.quota = AccountQuota()
                state.tenants, state.sending_paused = {}, set()
            state.released.clear()
            self._json(200, {"ok": True})
            return
        if self.path == "/_control/release":
            state.released.set()
            self._json(200, {"ok": True})
            return
        if self.path == GET_TENANT_PATH:
            self._get_tenant(raw)
            return
        if self.path != SEND_EMAIL_PATH:
            self._error(404, "NotFoundException", f"operation at {self.path} is not implemented here")
            return
        if "Authorization" not in self.headers:
            self._error(403, "AccessDeniedException", "request is not signed")
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._error(400, "BadRequestException", "body is not JSON")
            return
        recipients = body.get("Destination", {}).get("ToAddresses", [])
        if not recipients or not body.get("FromEmailAddress"):
            self._error(400, "BadRequestException", "FromEmailAddress and a destination are required")
            return
        recipient = recipients[0]
        tenant = body.get("TenantName")
        if tenant is not None:
            with state.lock:
                paused = tenant in state.sending_paused or state.tenants.get(tenant) == "DISABLED"
            if paused:
                self._error(400, "SendingPausedException", f"sending is paused for tenant {tenant}")
                return
        refusal = state.quota.admit()
        if refusal is not None:
            self._error(429, "TooManyRequestsException", refusal)
            return
        rule = state.pick_rule(recipient)
        kind = rule.kind if rule else None
        if kind == "latency" and rule:
            time.sleep(rule.seconds)
        elif kind == "throttle":
            self._error(429, "TooManyRequestsException", "Maximum sending rate exceeded.")
            return
        elif kind == "error" and rule:
            self._error(rule.status, rule.code or "InternalFailure", "injected server error")
            return
        elif kind == "account" and rule:
            self._error(400, rule.code or "SendingPausedException", "sending is paused for this account")
            return
        elif kind == "bare_error" and rule:
            self._bare_error(rule.status)
            return
        elif kind == "reset_before_accept":
            self._reset()
            return
        if kind == "reject" or recipient.split("@")[0].startswith(state.reject_prefix):
            self._error(400, "MessageRejected", f"Email address is not verified or rejected: {recipient}")
            return
        message = state.record(body)
        if kind == "timeout_after_accept" and rule:
            time.sleep(rule.seconds)
            self._reset()
            return
        if kind == "reset_after_accept":
            self._reset()
            return
        if kind == "no_message_id":
            self._json(200, {})
            return
        if kind == "hold_after_accept" and rule:
            with state.lock:
                state.holding.append(message)
            state.released.wait(rule.seconds or None)
            with state.lock:
                state.holding.remove(message)
        self._json(200, {"MessageId": message.message_id})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    state: EndpointState
    # The control port: an outage leaves its connections open.
    is_control = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (its read timeout) or was killed mid-request is part of the job.
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


OUTAGE_KINDS = ("503", "refused")
OUTAGE_RULE = FaultRule("error", status=503, code="ServiceUnavailable")


class SesEndpoint:
    """The endpoint in a background thread of this process."""

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        control_port: int | None = None,
        control_token: str | None = None,
    ) -> None:
        self.server = _Server((host, port), _Handler)
        self.server.state = EndpointState()
        if control_token is not None:
            if not control_token:
                raise ValueError("an empty control token would let anyone in")
            self.server.state.control_token = control_token
        self.thread = threading.Thread(target=self.server.serve_forever, name="ses-endpoint", daemon=True)
        self.outage_kind: str | None = None
        self._address = self.server.server_address[:2]
        self.state.set_outage = self.outage
        self.state.outage = lambda: self.outage_kind
        # The control paths on a port a "refused" outage leaves open (None: no such port).
        self.control: _Server | None = None
        if control_port is not None:
            self.control = _Server((host, control_port), _Handler)
            self.control.state = self.state
            self.control.is_control = True
            self.state.can_refuse = True

    @property
    def state(self) -> EndpointState:
        return self.server.state

    @property
    def control_token(self) -> str:
        """The bearer token every control request must carry."""
        return self.state.control_token

    def control_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.control_token}"}

    @property
    def url(self) -> str:
        host, port = self._address
        return f"http://{host!s}:{port}"

    @property
    def control_url(self) -> str:
        """Where the control paths stay reachable through every outage (the endpoint's own URL when
        no control port was asked for)."""
        if self.control is None:
            return self.url
        host, port = self.control.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> SesEndpoint:
        self.thread.start()
        if self.control is not None:
            threading.Thread(target=self.control.serve_forever, name="ses-control", daemon=True).start()
        return self

    def stop(self) -> None:
        self.state.released.set()
        if self.outage_kind != "refused":
            self.server.shutdown()
            self.server.server_close()
        if self.control is not None:
            self.control.shutdown()
            self.control.server_close()

    def set_faults(self, *rules: FaultRule) -> None:
        with self.state.lock:
            self.state.rules = list(rules)

    def outage(self, kind: str | None) -> None:
        """Start or change an outage (`"503"`, `"refused"`), or end it (None). A 503 outage goes
        before the other fault rules and leaves them in place."""
        if kind is not None and kind not in OUTAGE_KINDS:
            raise ValueError(f"unknown outage {kind!r}; one of {', '.join(OUTAGE_KINDS)}")
        # Stop listening before the 503 rule goes, and set it before listening again: no request may
        # slip through between the two kinds.
        if kind == "refused" and self.outage_kind != "refused":
            self._stop_listening()
        with self.state.lock:
            self.state.rules = [r for r in self.state.rules if r is not OUTAGE_RULE]
            if kind == "503":
                self.state.rules.insert(0, OUTAGE_RULE)
        if kind != "refused" and self.outage_kind == "refused":
            self._listen_again()
        self.outage_kind = kind

    def _stop_listening(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self.state.lock:
            open_connections = list(self.state.connections)
        for connection in open_connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def _listen_again(self) -> None:
        state = self.state
        self.server = _Server(self._address, _Handler)
        self.server.state = state
        self.thread = threading.Thread(target=self.server.serve_forever, name="ses-endpoint", daemon=True)
        self.thread.start()

    def requests_between(self, start: float, end: float) -> int:
        """SendEmail requests that reached the endpoint from `start` to `end` (time.time())."""
        with self.state.lock:
            return sum(1 for t in self.state.request_times if start <= t < end)

    def set_tenant(self, name: str, status: str = "ENABLED", *, sending_paused: bool = False) -> None:
        """Create or change an SES tenant: its GetTenant SendingStatus, and whether its sends are refused
        with SendingPausedException (as SES does while it pauses the tenant's sending)."""
        if status not in TENANT_STATUSES:
            raise ValueError(f"unknown sending status {status!r}; one of {', '.join(TENANT_STATUSES)}")
        with self.state.lock:
            self.state.tenants[name] = status
            if sending_paused:
                self.state.sending_paused.add(name)
            else:
                self.state.sending_paused.discard(name)

    def set_quota(self, **settings: Any) -> None:
        """max_send_rate, max_24_hour_send, sent_before, get_account ("allow" or "deny"), sandbox."""
        self.state.quota.configure(settings)

    def accepted(self) -> list[AcceptedMessage]:
        with self.state.lock:
            return list(self.state.accepted)

    def accepted_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for message in self.accepted():
            key = message.outbox_id or "?"
            counts[key] = counts.get(key, 0) + 1
        return counts

    def __enter__(self) -> SesEndpoint:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def write_secret(path: Path, text: str) -> None:
    """`text` in a file only its owner may read, created that way (never world-readable, not even for a
    moment), replacing what was there."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="local SESv2 SendEmail endpoint")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4579)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every send")
    parser.add_argument("--max-send-rate", type=float, help="the account's sends per second (GetAccount)")
    parser.add_argument("--max-24-hour-send", type=float, help="the account's sends per 24 hours")
    parser.add_argument(
        "--control-port",
        type=int,
        help="the control paths on a port of their own too (a refused outage needs it)",
    )
    parser.add_argument(
        "--control-token-file",
        required=True,
        type=Path,
        help="where to write the control API's bearer token (mode 0600; it is never printed)",
    )
    args = parser.parse_args()
    endpoint = SesEndpoint(args.port, args.host, control_port=args.control_port)
    write_secret(args.control_token_file, endpoint.control_token)
    quota = {"max_send_rate": args.max_send_rate, "max_24_hour_send": args.max_24_hour_send}
    endpoint.set_quota(**{k: v for k, v in quota.items() if v is not None})
    if args.latency:
        endpoint.set_faults(FaultRule("latency", seconds=args.latency))
    endpoint.start()
    print(
        f"SES endpoint listening on {endpoint.url}, control on {endpoint.control_url}"
        f" (bearer token in {args.control_token_file})",
        flush=True,
    )
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        endpoint.stop()


if __name__ == "__main__":
    main()
