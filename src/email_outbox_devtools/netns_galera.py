"""A 3-node MariaDB Galera cluster, or a semi-synchronous primary/replica pair, whose servers each live
in a network namespace of their own, so that a fault run (bench/faults.py) can cut a node off its
peers and heal it, pause a node, kill every node and bring the cluster back as docs/operations.md
says, or fail the pair over.

The namespaces hang off one bridge in the host's namespace with private addresses (10.39.N.0/24): the
host (workers, enqueuers, the checker) reaches every node; a partition is a blackhole route between
two nodes' addresses, so a cut-off node still answers its clients (refusing them with 1047, outside
the Primary Component), as in a real network split. No traffic leaves this machine. Needs root and
iproute2 (`ip netns`).
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mysql.connector

from email_outbox_devtools.dbserver import PrivateServer

PROVIDER = Path("/usr/lib/galera/libgalera_smm.so")
# Each run claims a network of its own, 10.39.N.0/24 with namespaces eoN..., so that runs on one
# machine (a developer's beside the suite's) never meet.
SUBNET_PREFIX = "10.39"
PORT = 3306


def missing_parts() -> str | None:
    """Why a namespaced cluster cannot start here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    if not PROVIDER.exists():
        return f"galera-4 is not installed ({PROVIDER} is missing)"
    for tool in ("mariadb-backup", "socat"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (the state transfer needs it)"
    probe = f"eoprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _ip(*args: str, ns: str | None = None, check: bool = True) -> None:
    cmd = ["ip", "netns", "exec", ns, "ip", *args] if ns else ["ip", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {result.stderr.strip()}")


def _ns(net: int, index: int) -> str:
    return f"eo{net}n{index}"


@dataclass
class NetNode:
    index: int
    server: PrivateServer
    net: int

    @property
    def name(self) -> str:
        return f"node{self.index}"

    @property
    def ns(self) -> str:
        return _ns(self.net, self.index)

    @property
    def ip(self) -> str:
        return f"{SUBNET_PREFIX}.{self.net}.{self.index}"

    def alive(self) -> bool:
        return self.server.process is not None and self.server.process.poll() is None

    def status(self) -> dict[str, str]:
        conn = mysql.connector.connect(host=self.ip, port=PORT, user="root", connection_timeout=2)
        try:
            cur: Any = conn.cursor()
            cur.execute(
                "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state', 'wsrep_ready',"
                " 'wsrep_cluster_size', 'wsrep_cluster_status')"
            )
            return {str(k): str(v) for k, v in cur.fetchall()}
        finally:
            conn.close()


@dataclass
class NetnsGalera:
    base: Path
    size: int = 3
    # innodb_flush_log_at_trx_commit for every node: 1 is what docs/operations.md asks of a cluster.
    flush_log_at_trx_commit: int = 1
    nodes: list[NetNode] = field(default_factory=list)
    cut: set[tuple[int, int]] = field(default_factory=set)
    net: int = 0  # this run's network number, claimed by make_network

    @property
    def subnet(self) -> str:
        return f"{SUBNET_PREFIX}.{self.net}"

    # --- the network ----------------------------------------------------------------------------
    def make_network(self) -> None:
        # Claim a free network number: creating its first namespace fails when another run has it.
        for net in random.sample(range(1, 250), 248):
            made = subprocess.run(["ip", "netns", "add", _ns(net, 1)], capture_output=True, check=False)
            if made.returncode == 0:
                self.net = net
                break
        else:
            raise RuntimeError("no free network number for the namespaces (ip netns list)")
        bridge = f"eo{self.net}br"
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.254/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for i in range(1, self.size + 1):
            ns, host_end = _ns(self.net, i), f"eo{self.net}v{i}"
            if i > 1:
                _ip("netns", "add", ns)
            _ip("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", host_end, "master", bridge)
            _ip("link", "set", host_end, "up")
            _ip("addr", "add", f"{self.subnet}.{i}/24", "dev", "eth0", ns=ns)
            _ip("link", "set", "eth0", "up", ns=ns)
            _ip("link", "set", "lo", "up", ns=ns)

    def remove_network(self) -> None:
        if not self.net:
            return
        for i in range(1, self.size + 1):
            _ip("netns", "del", _ns(self.net, i), check=False)
            _ip("link", "del", f"eo{self.net}v{i}", check=False)
        _ip("link", "del", f"eo{self.net}br", check=False)

    def isolate(self, index: int) -> None:
        """Cut node `index` off every other node (clients still reach it)."""
        for other in self.nodes:
            if other.index != index:
                self._route("add", index, other.index)

    def heal(self) -> None:
        for a, b in sorted(self.cut):
            self._route("del", a, b)

    def _route(self, action: str, a: int, b: int) -> None:
        pair = (min(a, b), max(a, b))
        if (action == "add") == (pair in self.cut):
            return
        _ip("route", action, "blackhole", f"{self.subnet}.{b}/32", ns=_ns(self.net, a))
        _ip("route", action, "blackhole", f"{self.subnet}.{a}/32", ns=_ns(self.net, b))
        if action == "add":
            self.cut.add(pair)
        else:
            self.cut.discard(pair)

    # --- the servers ----------------------------------------------------------------------------
    def _args(self, node: NetNode, bootstrap: bool) -> list[str]:
        peers = ",".join(f"{n.ip}:4567" for n in self.nodes if n.index != node.index)
        return [
            "--wsrep-on=ON",
            f"--wsrep-provider={PROVIDER}",
            "--wsrep-cluster-name=email-outbox-faults",
            f"--wsrep-cluster-address=gcomm://{'' if bootstrap else peers}",
            f"--wsrep-node-name={node.name}",
            f"--wsrep-node-address={node.ip}:4567",
            # gcache.recover: a node restarted after a crash still holds the writesets it had, so the
            # others rejoin by IST instead of a full state transfer (operations.md's recovery).
            f"--wsrep-provider-options=gmcast.listen_addr=tcp://{node.ip}:4567;ist.recv_addr={node.ip}:4568;gcache.size=128M;gcache.recover=yes",
            "--wsrep-sst-method=mariabackup",
            "--wsrep-sst-auth=root:",
            f"--wsrep-sst-receive-address={node.ip}:4444",
            "--binlog-format=ROW",
            "--innodb-autoinc-lock-mode=2",
            "--default-storage-engine=InnoDB",
            f"--server-id={node.index}",
            "--transaction-isolation=READ-COMMITTED",
            # root on loopback only by default: the host reaches the node over the bridge.
            f"--init-file={self.base / 'bridge-root.sql'}",
            f"--innodb-flush-log-at-trx-commit={self.flush_log_at_trx_commit}",
        ]

    def start(self) -> None:
        self._prepare()
        first = self.nodes[0]
        first.server.extra_args = self._args(first, bootstrap=True)
        first.server.start(timeout=180)
        self.wait_synced(count=1)
        # The others start from a copy of the founder's data directory, stopped cleanly: their state
        # (grastate.dat: the cluster's uuid and seqno) is the cluster's, so they join with no state
        # transfer, where a mariabackup SST cost 11 to 15 s a node.
        first.server.stop()
        for node in self.nodes[1:]:
            shutil.rmtree(node.server.datadir)
            shutil.copytree(
                first.server.datadir,
                node.server.datadir,
                ignore=shutil.ignore_patterns("gvwstate.dat", "galera.cache"),
            )
        first.server.start(timeout=180)
        self.wait_synced(count=1)
        for node in self.nodes[1:]:
            node.server.extra_args = self._args(node, bootstrap=False)
            node.server.start(timeout=180)
            self.wait_synced(count=node.index)
        # A later restart of the first node joins its peers instead of founding a second cluster.
        first.server.extra_args = self._args(first, bootstrap=False)

    def _prepare(self) -> None:
        """The namespaces, the bridge, and a stopped server for each node."""
        self.make_network()
        self.base.mkdir(parents=True, exist_ok=True)
        account = f"'root'@'{self.subnet}.%'"
        (self.base / "bridge-root.sql").write_text(
            f"{self._init_prefix()}CREATE USER IF NOT EXISTS {account} IDENTIFIED BY '';\n"
            f"GRANT ALL PRIVILEGES ON *.* TO {account} WITH GRANT OPTION;\n"
        )
        for i in range(1, self.size + 1):
            server = PrivateServer(
                self.base / f"node{i}",
                port=PORT,
                host=f"{self.subnet}.{i}",
                buffer_pool_size=None,
                launcher=["ip", "netns", "exec", _ns(self.net, i)],
            )
            self.nodes.append(NetNode(i, server, self.net))
        # One initialised data directory, copied: the others would only be replaced by a state
        # transfer (Galera) or start from the same empty state (the pair); initialising costs seconds.
        first = self.nodes[0].server
        first.initialise()
        for node in self.nodes[1:]:
            if not (node.server.datadir / "mysql").exists():
                shutil.copytree(first.datadir, node.server.datadir)

    def _init_prefix(self) -> str:
        """What the init file runs first (Galera: nothing; each node creates the account itself)."""
        return ""

    def wait_synced(self, count: int | None = None, timeout: float = 180) -> None:
        want = count or self.size
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                states = [n.status() for n in self.nodes if n.alive()]
                if (
                    len(states) >= want
                    and all(s["wsrep_local_state"] == "4" and s["wsrep_ready"] == "ON" for s in states)
                    and all(s["wsrep_cluster_size"] == str(want) for s in states)
                ):
                    return
                last = states
            except Exception as exc:
                last = exc
            time.sleep(0.3)
        raise RuntimeError(f"the cluster did not sync in {timeout}s: {last}")

    def pause(self, index: int) -> None:
        node = self.nodes[index - 1]
        assert node.server.process is not None
        os.kill(node.server.process.pid, signal.SIGSTOP)

    def resume(self, index: int) -> None:
        node = self.nodes[index - 1]
        assert node.server.process is not None
        os.kill(node.server.process.pid, signal.SIGCONT)

    def kill_all(self, within: float, rng: Any) -> None:
        """kill -9 of every node, in a random order, all within `within` seconds."""
        order = list(self.nodes)
        rng.shuffle(order)
        for node in order:
            node.server.kill()
            time.sleep(rng.uniform(0, within / len(order)))

    def recover(self) -> dict[str, int]:
        """docs/operations.md, "A Galera cluster after every node crashed": each node's last committed
        position from its InnoDB log (mariadbd --wsrep-recover), bootstrap from the most advanced
        node (safe_to_bootstrap: 1 in its grastate.dat, --wsrep-new-cluster), then start the others
        from their recovered positions (--wsrep-start-position, as galera_recovery does: they join
        by IST from the writesets the bootstrapped node recovered, gcache.recover, instead of a full
        state transfer). The seqno of each node, by name."""
        positions = {node.name: self._recovered_position(node) for node in self.nodes}
        seqno = {name: int(p.rpartition(":")[2]) if p else -1 for name, p in positions.items()}
        first = max(self.nodes, key=lambda n: seqno[n.name])
        grastate = first.server.datadir / "grastate.dat"
        grastate.write_text(re.sub(r"safe_to_bootstrap:\s*0", "safe_to_bootstrap: 1", grastate.read_text()))
        joined = first.server.extra_args
        # With its own position too, as galera_new_cluster passes it: without, it founded a new
        # history (a new cluster uuid, seqno 0) and every other node took a full state transfer.
        own = [f"--wsrep-start-position={positions[first.name]}"] if positions[first.name] else []
        first.server.extra_args = [*joined, "--wsrep-new-cluster", *own]
        first.server.start(timeout=180)
        first.server.extra_args = joined
        self.wait_synced(count=1)
        for node in self.nodes:
            if node is not first:
                usual = node.server.extra_args
                start_at = [f"--wsrep-start-position={positions[node.name]}"] if positions[node.name] else []
                node.server.extra_args = [*usual, *start_at]
                node.server.start(timeout=300)
                node.server.extra_args = usual
        self.wait_synced()
        return seqno

    def _recovered_position(self, node: NetNode) -> str:
        """uuid:seqno from mariadbd --wsrep-recover, or "" when it found none."""
        log = node.server.base_dir / "wsrep-recover.log"
        log.unlink(missing_ok=True)
        # Without the init file: its statements would wait for a cluster that recovery never joins.
        args = [a for a in node.server.command() if not a.startswith("--init-file=")]
        cmd = [*node.server.launcher, *args, f"--log-error={log}", "--wsrep-recover"]
        pattern = re.compile(r"Recovered position: ([0-9a-f-]+:-?\d+)")
        found: list[str] = []
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 300
            while not found and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
                found = pattern.findall(log.read_text(errors="replace")) if log.exists() else []
        finally:
            # Once it has logged the position the server has no more to do, but it does not always
            # exit (seen for minutes under load): what it logged is all that is wanted.
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=60)
        found = pattern.findall(log.read_text(errors="replace")) if log.exists() else []
        return found[-1] if found else ""

    def stop(self) -> None:
        for node in self.nodes:
            if node.alive():
                self.resume(node.index)
        for node in reversed(self.nodes):
            node.server.stop()
        self.remove_network()


@dataclass
class NetnsSemiSyncPair(NetnsGalera):
    """A MariaDB primary (node 1) and its semi-synchronous replica (node 2), in the same namespaces:
    binary log ROW with sync_binlog=1, `rpl_semi_sync_master_wait_point=AFTER_SYNC` and a 60 s
    semi-sync timeout (docs/operations.md, Failover), the replica read-only until `failover`
    promotes it."""

    size: int = 2

    def _args(self, node: NetNode, bootstrap: bool) -> list[str]:
        args = [
            f"--server-id={node.index}",
            "--log-bin=binlog",
            "--binlog-format=ROW",
            "--sync-binlog=1",
            "--log-slave-updates=ON",
            "--transaction-isolation=READ-COMMITTED",
            f"--innodb-flush-log-at-trx-commit={self.flush_log_at_trx_commit}",
            f"--init-file={self.base / 'bridge-root.sql'}",
        ]
        if node.index == 1:
            return [
                *args,
                "--rpl-semi-sync-master-enabled=ON",
                "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
                "--rpl-semi-sync-master-timeout=60000",
            ]
        return [*args, "--rpl-semi-sync-slave-enabled=ON", "--read-only=ON"]

    def _init_prefix(self) -> str:
        # Each server creates its own bridge account, unlogged: logged, the primary's creation waited
        # for a semi-sync acknowledgement from a replica not yet started (the 60 s timeout, at every
        # start), and the replica would then apply it a second time.
        return "SET sql_log_bin = 0;\n"

    def start(self) -> None:
        self._prepare()
        for node in self.nodes:
            node.server.extra_args = self._args(node, bootstrap=False)
            node.server.start(timeout=180)
        primary = self.nodes[0]
        self._admin(
            2,
            f"CHANGE MASTER TO MASTER_HOST='{primary.ip}', MASTER_PORT={PORT}, MASTER_USER='root',"
            # Retry each second, not each minute: the primary may still be running its init file.
            " MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
            "START SLAVE",
        )
        self.wait_synced()

    def wait_synced(self, count: int | None = None, timeout: float = 180) -> None:
        """Until the primary's commits wait for the replica again (semi-sync ON), or the primary is
        gone (after a failover)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            primary = self.nodes[0]
            if not primary.alive() and len(self.nodes) >= 2:
                return
            with contextlib.suppress(Exception):
                rows = self._admin(1, "SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_status'")
                if rows and str(rows[0][1]).upper() == "ON":
                    return
            time.sleep(0.3)
        raise RuntimeError(
            f"the replica did not acknowledge the primary in {timeout}s: {self._replica_errors()}"
        )

    def _replica_errors(self) -> str:
        try:
            conn = mysql.connector.connect(host=self.nodes[1].ip, port=PORT, user="root")
            try:
                cur: Any = conn.cursor(dictionary=True)
                cur.execute("SHOW SLAVE STATUS")
                status = cur.fetchone() or {}
            finally:
                conn.close()
        except mysql.connector.Error as exc:
            return f"replica unreadable: {exc}"
        return f"IO: {status.get('Last_IO_Error')!r}, SQL: {status.get('Last_SQL_Error')!r}"

    def failover(self) -> None:
        """kill -9 of the primary, then the replica promoted once it has applied all it received
        (semi-sync AFTER_SYNC: every commit a client saw is among them)."""
        self.nodes[0].server.kill()
        self._admin(2, "STOP SLAVE IO_THREAD")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            conn = mysql.connector.connect(host=self.nodes[1].ip, port=PORT, user="root")
            try:
                cur: Any = conn.cursor(dictionary=True)
                cur.execute("SHOW SLAVE STATUS")
                status = cur.fetchone() or {}
            finally:
                conn.close()
            if (status.get("Relay_Master_Log_File"), status.get("Exec_Master_Log_Pos")) == (
                status.get("Master_Log_File"),
                status.get("Read_Master_Log_Pos"),
            ):
                break
            time.sleep(0.1)
        self._admin(2, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0")

    def recover(self) -> dict[str, int]:
        raise NotImplementedError("a pair is failed over (failover), not bootstrapped")

    def _admin(self, index: int, *statements: str) -> list[Any]:
        node = self.nodes[index - 1]
        conn = mysql.connector.connect(host=node.ip, port=PORT, user="root", autocommit=True)
        try:
            cur: Any = conn.cursor()
            rows: list[Any] = []
            for statement in statements:
                cur.execute(statement)
                rows = cur.fetchall() if cur.with_rows else []
            return rows
        finally:
            conn.close()
