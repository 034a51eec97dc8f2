"""The one way a worker process is started outside production: by the tests, the benchmarks, the soak
and the demo. A real `email-outbox worker` subprocess against a local SES endpoint, its output in a
log file, stopped with SIGTERM (drains) or SIGKILL (a crash)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from email_outbox.db.dsn import DatabaseDsn

DEFAULT_FROM = "shop@example.com"


def worker_environment(
    dsn: DatabaseDsn, endpoint_url: str, extra: Mapping[str, str | None] | None = None
) -> dict[str, str]:
    """The process environment: the DSN, the default sender, and AWS settings aimed at `endpoint_url`.
    A None in `extra` removes that variable."""
    env = {
        **os.environ,
        "EMAIL_OUTBOX_DSN": dsn.url(),
        "EMAIL_OUTBOX_DEFAULT_FROM": DEFAULT_FROM,
        "AWS_ENDPOINT_URL_SESV2": endpoint_url,
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
    }
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def worker_command(name: str, flags: Mapping[str, object]) -> list[str]:
    """`email-outbox worker --worker-id NAME` plus one flag per setting (True: a bare switch)."""
    args = [sys.executable, "-m", "email_outbox.cli", "worker", "--worker-id", name]
    for key, value in flags.items():
        flag = "--" + key.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    return args


@dataclass
class WorkerProcess:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    metrics_port: int | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_healthy(self, timeout: float = 60) -> None:
        """Until /healthz answers 200 (needs `metrics_port`)."""
        assert self.metrics_port is not None, "started without --metrics-port"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(
                    f"worker {self.name} exited with {self.proc.returncode}: {self.log()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"worker {self.name} did not become healthy in {timeout:g}s")

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM: finish the sends in flight, claim nothing more; the exit code. A worker still
        running after `timeout` is asked for its threads' stacks (SIGUSR1), killed, and reported with
        the tail of its log, stacks included (WorkerWedged)."""
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.dump_stacks()
            self.kill()
            raise WorkerWedged(self, timeout) from None

    def dump_stacks(self, settle: float = 2.0) -> None:
        """SIGUSR1: the worker writes every thread's stack to its log (faulthandler), at once even
        while its threads are stuck; waits until the dump stops growing, at most `settle` seconds."""
        if not self.running():
            return
        before = self.log_path.stat().st_size
        self.proc.send_signal(signal.SIGUSR1)
        deadline, size = time.monotonic() + settle, before
        while time.monotonic() < deadline:
            time.sleep(0.3)
            grown = self.log_path.stat().st_size
            if grown == size and grown > before:
                return
            size = grown

    def kill(self) -> None:
        """SIGKILL: a crash, mid-whatever."""
        if self.running():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)


class WorkerWedged(subprocess.TimeoutExpired):
    """A worker that did not exit within its timeout after SIGTERM: killed after its stacks were dumped;
    the message carries the tail of its log."""

    def __init__(self, worker: WorkerProcess, timeout: float) -> None:
        super().__init__(worker.proc.args, timeout)
        self.worker = worker

    def __str__(self) -> str:
        return (
            f"worker {self.worker.name} did not exit within {self.timeout:g}s of SIGTERM; killed after its"
            f" stacks were dumped. Its log ({self.worker.log_path}) ends:\n{self.worker.log()[-12000:]}"
        )


def spawn_worker(
    dsn: DatabaseDsn,
    endpoint_url: str,
    log_dir: Path,
    name: str,
    *,
    env: Mapping[str, str | None] | None = None,
    **flags: object,
) -> WorkerProcess:
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            worker_command(name, flags),
            env=worker_environment(dsn, endpoint_url, env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    port = flags.get("metrics_port")
    return WorkerProcess(name, proc, log_path, int(str(port)) if port is not None else None)
