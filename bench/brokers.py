"""Private brokers for the Celery peers, started from Debian's binaries and never as a system service:
each on free loopback ports, with its data and logs in a temp directory, stopped and removed after.

- `RedisServer`: redis-server in memory only (`--save "" --appendonly no`): no disk writes at all;
- `RabbitServer`: a RabbitMQ node of its own (its own RABBITMQ_NODENAME, AMQP and distribution
  ports, and its own epmd on a port of its own, so a system RabbitMQ on 5672/25672/4369 is never
  touched), with a user and password made up for the run. Its queues are durable on disk: Mnesia and
  the message store live in the run's temp directory.

Each gives the Celery URL (a password only in the URL, which reaches the workers in their
environment, never in argv), the pids whose CPU is the store's, and `backlog()`, the messages waiting
on a queue.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import process_tree

from email_outbox_devtools.dbserver import free_port


def _binary(name: str, *candidates: str) -> str:
    found = shutil.which(name) or next((p for p in candidates if Path(p).exists()), None)
    if found is None:
        raise RuntimeError(
            f"no {name} binary: run db/ensure-server-binary.sh (installs it from Debian's packages)"
        )
    return found


def _stop(proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


class RedisServer:
    """A private redis-server: a free port, a temp directory, in memory only."""

    name = "Redis"

    def __init__(self, base: Path) -> None:
        binary = _binary("redis-server", "/usr/bin/redis-server", "/usr/sbin/redis-server")
        self.dir = Path(tempfile.mkdtemp(prefix="redis-", dir=base))
        self.port = free_port()
        self.password = secrets.token_hex(16)
        self.url = f"redis://:{self.password}@127.0.0.1:{self.port}/0"
        config = self.dir / "redis.conf"  # the password in a file, not in argv
        config.write_text(f"requirepass {self.password}\n")
        config.chmod(0o600)
        self.proc = subprocess.Popen(
            [binary, str(config), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--save", "", "--appendonly", "no", "--daemonize", "no",
             "--logfile", str(self.dir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        import redis

        client = self.client()
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start; see {self.dir / 'redis.log'}") from None
                time.sleep(0.05)
        client.close()

    def client(self) -> Any:
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password, socket_connect_timeout=1)

    def store_pids(self) -> list[int]:
        return [self.proc.pid]

    def backlog(self, queue: str) -> int:
        client = self.client()
        try:
            return int(client.llen(queue))
        finally:
            client.close()

    def close(self) -> None:
        _stop(self.proc, timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # Debian's; /usr/sbin's wrapper su's to rabbitmq


class RabbitServer:
    """A private RabbitMQ node: its own node name, ports, epmd, Mnesia and log directories."""

    name = "RabbitMQ"

    def __init__(self, base: Path, start_timeout: float = 120) -> None:
        server = RABBITMQ_SERVER if Path(RABBITMQ_SERVER).exists() else _binary("rabbitmq-server")
        epmd = _binary("epmd", "/usr/bin/epmd")
        self.dir = Path(tempfile.mkdtemp(prefix="rabbitmq-", dir=base))
        self.port, dist_port, epmd_port = free_port(), free_port(), free_port()
        user, self.password = "bench", secrets.token_hex(16)
        self.url = f"amqp://{user}:{self.password}@127.0.0.1:{self.port}//"
        node = f"bench{self.port}@localhost"
        config = self.dir / "rabbitmq.conf"
        config.write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\n"
            f"default_user = {user}\ndefault_pass = {self.password}\n"
            "log.console = false\nlog.file.level = warning\n"
        )
        config.chmod(0o600)
        (self.dir / "enabled_plugins").write_text("[].\n")  # no management listener
        (self.dir / "rabbitmq-env.conf").write_text("")  # not /etc/rabbitmq's (the system node's name)
        self.env = {
            "PATH": "/usr/bin:/bin:/usr/sbin:/sbin",
            "HOME": str(self.dir),  # the node's Erlang cookie, made up here
            "LANG": "C.UTF-8",
            "RABBITMQ_CONF_ENV_FILE": str(self.dir / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(config),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.dir / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.dir / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(self.dir / "plugins-expand"),
            "RABBITMQ_NODENAME": node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(self.dir / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.dir / "log"),
            "RABBITMQ_PID_FILE": str(self.dir / "rabbitmq.pid"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_PORT": str(epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }
        # Our own epmd, in the foreground as our child, so the node registers there (not with a system
        # epmd) and it is stopped by its pid afterwards.
        self.epmd = subprocess.Popen(
            [epmd, "-port", str(epmd_port), "-address", "127.0.0.1"],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.log = open(self.dir / "startup.log", "wb")  # noqa: SIM115 - lives with the process
        self.proc = subprocess.Popen(
            [server], env=self.env, cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + start_timeout
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"rabbitmq-server did not start; see {self.dir}/startup.log and log/")
            time.sleep(0.2)

    def _answers(self) -> bool:
        """The AMQP port takes a connection and a login (the node is booted, not only listening)."""
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            import kombu

            with kombu.Connection(self.url, connect_timeout=2) as conn:
                conn.connect()
                return True
        return False

    def store_pids(self) -> list[int]:
        return [*process_tree(self.proc.pid), self.epmd.pid]

    def backlog(self, queue: str) -> int:
        import kombu

        with kombu.Connection(self.url) as conn:
            return int(conn.default_channel.queue_declare(queue, passive=True).message_count)

    def close(self) -> None:
        # The node is stopped through its own beam.smp, whose pid it wrote (SIGTERM is a clean shutdown
        # in OTP 23+); the script that started it then exits.
        try:
            pids = [int((self.dir / "rabbitmq.pid").read_text().strip())]
        except (OSError, ValueError):  # it never got that far: the processes the script started
            pids = process_tree(self.proc.pid)[1:]
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        _stop(self.proc, timeout=60)
        _stop(self.epmd, timeout=10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
