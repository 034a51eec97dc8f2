"""`make dev` (python -m email_outbox_devtools.dev): it prints a DSN, of an account of its own with a
password and kept in a 0600 file, that connects to a migrated database with the example sender allowed;
the local SES endpoint's control port, behind a bearer token, starts and ends a refused-connection
outage and answers GetAccount as a sandbox account; and Ctrl-C (SIGINT) stops the endpoint and the
database server and exits 0."""

from __future__ import annotations

import json
import os
import queue
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

import mysql.connector
import pytest

from email_outbox.db.dsn import DSN_FILE_ENV, DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.support.servers import template_datadir
from tests.support.ses_clients import ses_client


def _lines(stream: IO[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _read_until(lines: queue.Queue[str], marker: str, timeout: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while not any(marker in line for line in seen):
        try:
            seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            pytest.fail(f"no {marker!r} within {timeout}s; printed:\n{''.join(seen)}")
    return seen


def _printed(lines: list[str], label: str) -> str:
    (value,) = [line.split()[1] for line in lines if line.startswith(label + " ")]
    return value


def _put(url: str, body: object, headers: dict[str, str]) -> object:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="PUT", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def _accepted(control: str, headers: dict[str, str]) -> list[dict[str, object]]:
    request = urllib.request.Request(control + "/_control/accepted", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        accepted: list[dict[str, object]] = json.loads(response.read())
        return accepted


def _status_without(url: str, headers: dict[str, str] | None = None) -> int:
    """The HTTP status of a control request that should be refused."""
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10)
    return refused.value.code


def _owner_only(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == 0o600


def _refused(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_make_dev_prints_a_working_dsn_and_endpoint_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    # An initialised data directory, as a second `make dev` finds it (initialising costs seconds).
    shutil.copytree(template_datadir(), tmp_path / "db" / "data")
    proc = _start_dev(tmp_path)
    try:
        assert proc.stdout is not None
        lines = _lines(proc.stdout)
        printed = _read_until(lines, "Ctrl-C stops", 120)
        dsn_file, token_file = Path(_printed(printed, "DSN-file")), Path(_printed(printed, "token-file"))
        ses, control = _printed(printed, "SES"), _printed(printed, "control")
        assert any('"kind": "refused"' in line for line in printed), "how to refuse connections"

        # The DSN: an account of its own with a password, kept where only its owner reads it; the
        # commands printed name the file, never the password.
        assert _owner_only(dsn_file) and _owner_only(token_file)
        dsn = DatabaseDsn.parse(dsn_file.read_text().strip())
        assert dsn.url() == _printed(printed, "DSN")
        assert dsn.user != "root" and len(dsn.password) >= 20
        commands = [line for line in printed if line.startswith("  ")]
        assert any(f"{DSN_FILE_ENV}={dsn_file}" in line for line in commands)
        assert not any(dsn.password in line for line in commands)
        with pytest.raises(Exception, match="Access denied"):
            OutboxRepository.open(DatabaseDsn(dsn.user, "", dsn.host, dsn.port, dsn.database, None))
        # Nor is the server's root open to anyone on the machine.
        assert _owner_only(tmp_path / "db" / "root-password")
        with pytest.raises(mysql.connector.Error, match="Access denied"):
            mysql.connector.connect(host=dsn.host, port=dsn.port, user="root", password="")
        repo = OutboxRepository.open(dsn)
        assert repo.sender_allowed("shop@example.com"), "the example sender domain is allowed"
        repo.close()
        # The email printed, as typed (from the repository root), on this account.
        start = printed.index("An email:\n") + 1
        typed = " ".join(line.strip().removesuffix("\\") for line in printed[start : start + 3])
        enqueued = subprocess.run(
            shlex.split(typed), capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[2]
        )
        assert enqueued.returncode == 0, enqueued.stderr

        # The control API: 401 without the token (or with another), the token from its file works.
        token = token_file.read_text().strip()
        assert token == _printed(printed, "token")
        assert _status_without(control + "/_control/outage") == 401
        assert _status_without(control + "/_control/accepted", {"Authorization": "Bearer nope"}) == 401
        assert _status_without(ses + "/_control/accepted") == 401
        auth = {"Authorization": f"Bearer {token}"}
        assert all(
            f"-H @{token_file.parent / 'ses-control.header'}" in line for line in printed if "curl" in line
        )
        assert _owner_only(token_file.parent / "ses-control.header")

        # The worker printed, as typed (its metrics port left out: another may hold 9108), sends it.
        start = printed.index("A worker against them:\n") + 1
        typed = " ".join(line.strip().removesuffix("\\") for line in printed[start : start + 4])
        words = shlex.split(typed.replace("--metrics-port 9108", ""))
        env = dict(word.split("=", 1) for word in words if "=" in word and not word.startswith("-"))
        argv = [word for word in words if word.partition("=")[0] not in env]
        worker = subprocess.Popen(
            argv, env={"PATH": os.environ["PATH"], **env}, cwd=Path(__file__).parents[2],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not _accepted(control, auth) and time.monotonic() < deadline and worker.poll() is None:
                time.sleep(0.2)
            assert [m["to"] for m in _accepted(control, auth)] == [["ann@example.com"]]
        finally:
            worker.send_signal(signal.SIGTERM)
            worker_log, _ = worker.communicate(timeout=60)
        assert "schema release" not in worker_log and "Traceback" not in worker_log, worker_log

        _put(control + "/_control/outage", {"kind": "refused"}, auth)
        assert _refused(ses)
        _put(control + "/_control/outage", {"kind": None}, auth)
        assert not _refused(ses)

        _put(control + "/_control/quota", {"sandbox": True}, auth)
        account = ses_client("boto3", ses).get_account()
        assert account["ProductionAccessEnabled"] is False
        assert account["SendQuota"]["Max24HourSend"] == 200

        server_pid = int((tmp_path / "db" / "mysqld.pid").read_text())
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 0
        rest = _read_until(lines, "stopped", 5)
        assert "stopping\n" in rest
        assert not Path(f"/proc/{server_pid}").exists(), "the database server outlived make dev"
        assert _refused(ses) and _refused(control)
    finally:
        _end(proc)

    # A second run on the same directory: root's password from its file, a new password for the account.
    proc = _start_dev(tmp_path)
    try:
        assert proc.stdout is not None
        again = DatabaseDsn.parse(_printed(_read_until(_lines(proc.stdout), "Ctrl-C stops", 120), "DSN"))
        assert again.password != dsn.password
        OutboxRepository.open(again).close()
        with pytest.raises(Exception, match="Access denied"):  # the first run's password
            OutboxRepository.open(
                DatabaseDsn(dsn.user, dsn.password, again.host, again.port, again.database, None)
            )
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 0
    finally:
        _end(proc)


def _start_dev(state: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "email_outbox_devtools.dev", "--dir", str(state)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _end(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def test_without_a_control_port_a_refused_outage_is_refused_and_a_503_one_is_not() -> None:
    """A refused outage closes the endpoint's own port, so only a control port could end it."""
    with SesEndpoint() as endpoint:
        auth = endpoint.control_headers()
        request = urllib.request.Request(
            endpoint.url + "/_control/outage",
            data=json.dumps({"kind": "refused"}).encode(),
            method="PUT",
            headers=auth,
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 409
        assert _put(endpoint.url + "/_control/outage", {"kind": "503"}, auth) == {"kind": "503"}
        assert endpoint.outage_kind == "503"
        assert _put(endpoint.url + "/_control/outage", {"kind": None}, auth) == {"kind": None}
        assert not _refused(endpoint.url)
