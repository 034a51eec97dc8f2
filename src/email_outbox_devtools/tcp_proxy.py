"""A TCP proxy on loopback whose backend can be switched: the failover tests' stand-in for the DNS name,
virtual IP or proxy (ProxySQL, MaxScale, RDS's endpoint) that production moves to a promoted replica.

Switching closes every connection through the proxy, as a failover does to clients of the old primary.
A connection whose backend does not answer is closed at once, so a client sees a lost connection and
reconnects, never a hang.
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress


class TcpProxy:
    def __init__(self, backend_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.backend_port = backend_port
        self._listener = socket.create_server((host, 0))
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def __enter__(self) -> TcpProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def switch(self, backend_port: int) -> None:
        """Send new connections to `backend_port` and drop every current one."""
        with self._lock:
            self.backend_port = backend_port
            doomed, self._open = self._open, set()
        for sock in doomed:
            _close(sock)

    def close(self) -> None:
        self._closed.set()
        _close(self._listener)
        self.switch(self.backend_port)

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        with self._lock:
            port = self.backend_port
        try:
            backend = socket.create_connection((self.host, port), timeout=2)
            backend.settimeout(None)
        except OSError:
            _close(client)
            return
        for sock in (client, backend):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            if port != self.backend_port:  # switched while connecting
                _close(client)
                _close(backend)
                return
            self._open.update((client, backend))
        for source, target in ((client, backend), (backend, client)):
            threading.Thread(target=self._pipe, args=(source, target), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(target)
            with self._lock:
                self._open.discard(source)
                self._open.discard(target)


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with suppress(OSError):
        sock.close()
