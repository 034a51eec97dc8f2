"""A private MariaDB/MySQL server in a directory of its own, for tests, the demo and the soak.

It never touches a system server: own data directory, own socket, own TCP port on 127.0.0.1.
Fault tests kill it with SIGKILL and start it again on the same data directory and port.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mysql.connector


class ServerStartError(RuntimeError):
    """The private server could not be initialised or did not come up."""


def find_server_binary() -> str | None:
    for name in ("mariadbd", "mysqld"):
        found = shutil.which(name) or shutil.which(
            name, path="/usr/sbin:/usr/local/sbin:/usr/local/mysql/bin"
        )
        if found:
            return found
    return None


_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _try_bind(port: int) -> int | None:
    """The loopback port a socket bound to `port` got (0 asks the kernel for one), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return None
        return int(s.getsockname()[1])


def free_port() -> int:
    """A loopback port to listen on later, below the kernel's ephemeral range.

    A port from bind(0) is an ephemeral port, the range the kernel also takes the source port of
    every outgoing connection from. A port chosen now and listened on later (a Galera joiner's
    state-transfer port, a server restarted on its old port after kill -9) could be taken by any
    connection in between, and the listener then fails. Below that range no connection takes it,
    and no port is handed out twice by one process.
    """
    low, _ = _ephemeral_range()
    floor = max(1024, low // 2)
    candidates = range(floor, low)
    if len(candidates) < 1000:  # a kernel whose ephemeral range starts low: take what bind(0) gives
        port = _try_bind(0)
        if port is None:
            raise ServerStartError("no free loopback port")
        return port
    for _ in range(200):
        port = random.choice(candidates)
        if port not in _handed_out and _try_bind(port):
            _handed_out.add(port)
            return port
    raise ServerStartError(f"no free loopback port between {floor} and {low - 1}")


def _is_mariadb(binary: str) -> bool:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=False).stdout
    return "mariadb" in out.lower()


@dataclass
class PrivateServer:
    """One mariadbd/mysqld process owned by this Python process."""

    base_dir: Path
    port: int = 0
    binary: str = ""
    durable: bool = False
    extra_args: list[str] = field(default_factory=list)
    # None leaves the server's default: Galera's mariabackup state transfer copies the server's
    # --innodb-buffer-pool-size onto mariadb-backup's command line, which refuses it.
    buffer_pool_size: str | None = "256M"
    # A command the server runs under (valgrind for bench/procedure_costs.py); empty: none.
    launcher: list[str] = field(default_factory=list)
    # The address it listens on: loopback, or its own address inside a network namespace (the fault
    # runs: bench/faults.py), with the launcher `ip netns exec NAME`.
    host: str = "127.0.0.1"
    # root's password, once something set one (`make dev` does); the fixtures leave it empty.
    root_password: str = ""
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        # Absolute: the installer changes directory, so a relative datadir would land elsewhere.
        self.base_dir = Path(self.base_dir).resolve()
        if not self.binary:
            found = find_server_binary()
            if not found:
                raise ServerStartError(
                    "neither mariadbd nor mysqld is on PATH (apt-get install mariadb-server)"
                )
            self.binary = found
        if not self.port:
            self.port = free_port()
        self.is_mariadb = _is_mariadb(self.binary)

    @property
    def datadir(self) -> Path:
        return self.base_dir / "data"

    @property
    def socket_path(self) -> Path:
        return self.base_dir / "mysqld.sock"

    @property
    def tmpdir(self) -> Path:
        path = self.base_dir / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def log_path(self) -> Path:
        return self.base_dir / "mysqld.log"

    def dsn(self, database: str, user: str = "root", password: str = "") -> str:
        auth = f"{user}:{password}@" if password else f"{user}@"
        return f"mysql://{auth}{self.host}:{self.port}/{database}"

    def _user_args(self) -> list[str]:
        # mariadbd/mysqld refuse to run as root unless told so explicitly.
        return ["--user=root"] if os.geteuid() == 0 else []

    def initialise(self) -> None:
        if (self.datadir / "mysql").exists():
            return
        self.datadir.mkdir(parents=True, exist_ok=True)
        if self.is_mariadb:
            installer = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
            if not installer:
                raise ServerStartError("mariadb-install-db not found next to mariadbd")
            cmd = [
                installer,
                "--no-defaults",
                f"--datadir={self.datadir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *self._user_args(),
            ]
        else:
            cmd = [
                self.binary,
                "--no-defaults",
                "--initialize-insecure",
                f"--datadir={self.datadir}",
                *self._user_args(),
            ]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ServerStartError(f"initialising {self.datadir} failed: {result.stderr[-2000:]}")

    def command(self) -> list[str]:
        flush = "1" if self.durable else "2"
        args = [
            self.binary,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--socket={self.socket_path}",
            f"--port={self.port}",
            f"--bind-address={self.host}",
            f"--pid-file={self.base_dir / 'mysqld.pid'}",
            f"--log-error={self.log_path}",
            # --no-defaults would leave latin1 (docs/design.md section 5).
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            # Test speed without giving up crash safety against kill -9: with 2 the log is written at
            # every commit and survives a killed process; only an OS crash could lose the last second.
            f"--innodb-flush-log-at-trx-commit={flush}",
            *([f"--innodb-buffer-pool-size={self.buffer_pool_size}"] if self.buffer_pool_size else []),
            "--max-connections=400",
            "--skip-name-resolve",
            # Its own temporary directory: servers sharing /tmp met each other's temporary-table files
            # (error 6 on delete) once a Galera node was killed and restarted beside the others.
            f"--tmpdir={self.tmpdir}",
            "--default-time-zone=+00:00",
            *self._user_args(),
        ]
        if self.is_mariadb:
            args.append("--skip-log-bin")
        else:
            args += ["--skip-log-bin", "--mysqlx=OFF"]
        return args + self.extra_args

    def _stop_leftover(self) -> None:
        """A server a crashed earlier run left on this data directory would hold its files locked."""
        pid_file = self.base_dir / "mysqld.pid"
        try:
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, ValueError):
            return
        if f"--datadir={self.datadir}" not in cmdline:
            return
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    def start(self, timeout: float = 60.0) -> None:
        self.initialise()
        if self.process is None:
            self._stop_leftover()
        if self.socket_path.exists():
            self.socket_path.unlink()
        log = open(self.base_dir / "mysqld.stdout", "ab")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            self.launcher + self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServerStartError(f"server exited with {self.process.returncode}: {self.tail_log()}")
            try:
                conn = self.root_connection(connection_timeout=2)
                conn.close()
                return
            except mysql.connector.Error as exc:
                last_error = exc
                time.sleep(0.1)
        raise ServerStartError(f"server not ready after {timeout}s ({last_error}): {self.tail_log()}")

    def root_connection(self, **options: Any) -> Any:
        return mysql.connector.connect(
            host=self.host, port=self.port, user="root", password=self.root_password, **options
        )

    def tail_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def kill(self) -> None:
        """SIGKILL: the crash a fault test wants, with no chance to flush or clean up."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()

    def restart(self, timeout: float = 60.0) -> None:
        self.stop()
        self.start(timeout)

    def version(self) -> str:
        conn = self.root_connection()
        try:
            cur: Any = conn.cursor()
            cur.execute("SELECT VERSION()")
            row = cur.fetchone()
            return str(row[0]) if row else "?"
        finally:
            conn.close()
