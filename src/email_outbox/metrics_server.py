"""The one /metrics, /healthz and /readyz server of the worker and the events consumer: one thread
running an asyncio server, whatever the number of clients.

/healthz is liveness (restart the process when it fails: it is wedged); /readyz is readiness (it can
reach the database and do its job now: a rollout waits for it, a load balancer or an orchestrator
counts the replica as available). Both answer JSON saying which check failed.

Bounded by construction: at most `max_connections` open at once, a request must arrive within
`read_timeout` seconds and fit in `MAX_REQUEST_BYTES`. A connection arriving when all are taken
closes the oldest one still waiting for its request, not itself: a scanner holding hundreds of idle
connections costs file descriptors, never threads, and a liveness probe's /healthz is still answered
at once (it would otherwise be refused until the idle ones timed out, and the pod restarted).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

# The text format every Prometheus scrapes.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

HealthCheck = Callable[[], tuple[bool, dict[str, Any]]]


def always_healthy() -> tuple[bool, dict[str, Any]]:
    """The health of a process whose only duty here is to be up (the events consumer)."""
    return True, {"ok": True}


class MetricsServer:
    MAX_REQUEST_BYTES = 8192

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        health: HealthCheck = always_healthy,
        ready: HealthCheck | None = None,
        *,
        read_timeout: float = 5.0,
        max_connections: int = 64,
    ) -> None:
        self.registry = registry
        self.health = health
        self.ready = ready or health
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        # Every open connection, oldest first; True while it is still waiting for its request.
        self._open: OrderedDict[asyncio.Task[Any], bool] = OrderedDict()
        self.dropped_idle = 0
        self.loop = asyncio.new_event_loop()
        # Bound here, in the caller's thread, so a taken port fails the start, not a background thread.
        self._socket = socket.create_server((host, port), reuse_port=False)
        self._server: asyncio.Server | None = None
        self.thread = threading.Thread(target=self._serve, name="metrics", daemon=True)
        self._ready = threading.Event()

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def open_connections(self) -> int:
        return len(self._open)

    def start(self) -> None:
        self.thread.start()
        self._ready.wait(5)

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._server = self.loop.run_until_complete(
            asyncio.start_server(self._handle, sock=self._socket, limit=self.MAX_REQUEST_BYTES)
        )
        self._ready.set()
        try:
            self.loop.run_forever()
        finally:
            self._server.close()
            self.loop.close()

    def _make_room(self) -> bool:
        """Room for one more connection: close the oldest one still waiting for its request if all are
        taken. False when every open connection is being answered (the newcomer is closed instead)."""
        if len(self._open) < self.max_connections:
            return True
        for task, waiting in self._open.items():
            if waiting:
                del self._open[task]
                task.cancel()
                self.dropped_idle += 1
                return True
        return False

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or not self._make_room():
            writer.close()
            return
        self._open[task] = True
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.read_timeout)
            if task in self._open:
                self._open[task] = False
            status, content_type, body = self._answer(head)
            writer.write(
                f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await asyncio.wait_for(writer.drain(), self.read_timeout)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except asyncio.CancelledError:
            pass  # dropped as the oldest idle connection to make room for a new one
        finally:
            self._open.pop(task, None)
            writer.close()

    def _answer(self, head: bytes) -> tuple[int, str, bytes]:
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or parts[0] != b"GET":
            return 405, "text/plain", b"only GET /metrics, /healthz and /readyz\n"
        path = parts[1].split(b"?", 1)[0]
        if path == b"/metrics":
            return 200, CONTENT_TYPE, generate_latest(self.registry)
        if path in (b"/healthz", b"/readyz"):
            ok, detail = (self.health if path == b"/healthz" else self.ready)()
            return 200 if ok else 503, "application/json", json.dumps(detail).encode()
        return 404, "text/plain", b"not found: try /metrics, /healthz or /readyz\n"
