"""A real OTLP/HTTP trace receiver for the tests: it decodes what exporters POST to /v1/traces with the
official OpenTelemetry protocol definitions (the opentelemetry-proto package's generated messages), as
a collector does. Debian packages no OpenTelemetry Collector and PyPI has none from the project, so
this is the receiving end of the protocol, not a stand-in for the exporter: the worker's real SDK and
exporter send to it. Loopback only, and a bearer token is required, as OTEL_EXPORTER_OTLP_HEADERS
passes it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]  # (trace id, span id)
    status_code: int


@dataclass
class _State:
    token: str
    spans: list[ReceivedSpan] = field(default_factory=list)
    refused: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        state = self.server.state
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Authorization") != f"Bearer {state.token}":
            with state.lock:
                state.refused += 1
            self.send_response(401)
            self.end_headers()
            return
        if self.path != "/v1/traces":
            self.send_response(404)
            self.end_headers()
            return
        request = ExportTraceServiceRequest.FromString(body)
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            service=str(resource.get("service.name")),
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                            status_code=span.status.code,
                        )
                    )
        with state.lock:
            state.spans.extend(received)
        payload = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: _State


class OtlpReceiver:
    def __init__(self, token: str) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.state = _State(token)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def token(self) -> str:
        return self._server.state.token

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def spans(self) -> list[ReceivedSpan]:
        with self._server.state.lock:
            return list(self._server.state.spans)

    @property
    def refused(self) -> int:
        return self._server.state.refused

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
