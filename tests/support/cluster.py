"""A 3-node MariaDB Galera cluster of private servers on loopback, for the cluster tests.

Each node is a private server (its own data directory, ports and socket) with the galera-4 provider.
The first node bootstraps the cluster; the others join by state transfer with mariabackup. Nothing
listens beyond 127.0.0.1.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from email_outbox_devtools.dbserver import PrivateServer, free_port
from tests.support.servers import query, start_server

PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")


def missing_cluster_parts() -> str | None:
    """Why a cluster cannot start here, or None."""
    if not PROVIDER.exists():
        return f"galera-4 is not installed ({PROVIDER} is missing)"
    for tool in ("mariadb-backup", "socat"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (the state transfer needs it)"
    return None


@dataclass
class Node:
    name: str
    server: PrivateServer
    gcomm_port: int
    ist_port: int
    sst_port: int


@dataclass
class GaleraCluster:
    nodes: list[Node] = field(default_factory=list)

    def wait_synced(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                states = [
                    _status(n.server)
                    for n in self.nodes
                    if n.server.process and n.server.process.poll() is None
                ]
                if (
                    states
                    and all(s["wsrep_local_state"] == "4" and s["wsrep_ready"] == "ON" for s in states)
                    and all(s["wsrep_cluster_size"] == str(len(states)) for s in states)
                ):
                    return
            except Exception:
                pass
            time.sleep(0.2)
        raise AssertionError(f"the cluster did not sync in {timeout}s")

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.server.stop()


def _status(server: PrivateServer) -> dict[str, str]:
    rows = query(
        server,
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state', 'wsrep_ready', 'wsrep_cluster_size')",
    )
    return {r["Variable_name"]: str(r["Value"]) for r in rows}


def _node_args(node: Node, peers: list[Node], bootstrap: bool) -> list[str]:
    address = "gcomm://" if bootstrap else "gcomm://" + ",".join(f"127.0.0.1:{p.gcomm_port}" for p in peers)
    return [
        "--wsrep-on=ON",
        f"--wsrep-provider={PROVIDER}",
        "--wsrep-cluster-name=email-outbox-test",
        f"--wsrep-cluster-address={address}",
        f"--wsrep-node-name={node.name}",
        f"--wsrep-node-address=127.0.0.1:{node.gcomm_port}",
        f"--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:{node.gcomm_port};ist.recv_addr=127.0.0.1:{node.ist_port};gcache.size=64M",
        "--wsrep-sst-method=mariabackup",
        "--wsrep-sst-auth=root:",
        f"--wsrep-sst-receive-address=127.0.0.1:{node.sst_port}",
        "--binlog-format=ROW",
        "--log-bin=binlog",
        "--log-bin-trust-function-creators=0",
        "--innodb-autoinc-lock-mode=2",
        "--default-storage-engine=InnoDB",
        f"--server-id={node.gcomm_port}",
    ]


def start_cluster(base: Path, size: int = 3) -> GaleraCluster:
    nodes = []
    for i in range(size):
        nodes.append(Node(f"node{i + 1}", None, free_port(), free_port(), free_port()))  # type: ignore[arg-type]
    cluster = GaleraCluster()
    for i, node in enumerate(nodes):
        args = _node_args(node, nodes, bootstrap=(i == 0))
        node.server = start_server(base / node.name, *args, buffer_pool_size=None)
        cluster.nodes.append(node)
        cluster.wait_synced()
    return cluster
