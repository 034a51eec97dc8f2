"""The loopback ports the private servers, Galera nodes and endpoints listen on (devtools.dbserver)."""

from __future__ import annotations

import socket
from pathlib import Path

from email_outbox_devtools.dbserver import free_port


def test_free_ports_lie_below_the_range_outgoing_connections_take_source_ports_from() -> None:
    low, _ = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    ports = [free_port() for _ in range(60)]
    assert all(1024 <= p < low for p in ports), (low, ports)
    assert len(set(ports)) == len(ports), "one process was handed the same port twice"


def test_a_free_port_can_be_listened_on() -> None:
    port = free_port()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            assert client.getpeername()[1] == port
