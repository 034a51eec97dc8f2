"""`make dev` (python -m email_outbox_devtools.dev): it prints a DSN that connects to a migrated
database with the example sender allowed, the local SES endpoint's control port starts and ends a
refused-connection outage and answers GetAccount as a sandbox account, and Ctrl-C (SIGINT) stops the
endpoint and the database server and exits 0."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

import pytest

from email_outbox.db.dsn import DatabaseDsn
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


def _put(url: str, body: object) -> object:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="PUT")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


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
    proc = subprocess.Popen(
        [sys.executable, "-m", "email_outbox_devtools.dev", "--dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = _lines(proc.stdout)
        printed = _read_until(lines, "Ctrl-C stops", 120)
        dsn = DatabaseDsn.parse(_printed(printed, "DSN"))
        ses, control = _printed(printed, "SES"), _printed(printed, "control")
        assert any('"kind": "refused"' in line for line in printed), "how to refuse connections"

        repo = OutboxRepository.open(dsn)
        assert repo.sender_allowed("shop@example.com"), "the example sender domain is allowed"
        repo.close()

        _put(control + "/_control/outage", {"kind": "refused"})
        assert _refused(ses)
        _put(control + "/_control/outage", {"kind": None})
        assert not _refused(ses)

        _put(control + "/_control/quota", {"sandbox": True})
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
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_without_a_control_port_a_refused_outage_is_refused_and_a_503_one_is_not() -> None:
    """A refused outage closes the endpoint's own port, so only a control port could end it."""
    with SesEndpoint() as endpoint:
        request = urllib.request.Request(
            endpoint.url + "/_control/outage", data=json.dumps({"kind": "refused"}).encode(), method="PUT"
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 409
        assert _put(endpoint.url + "/_control/outage", {"kind": "503"}) == {"kind": "503"}
        assert endpoint.outage_kind == "503"
        assert _put(endpoint.url + "/_control/outage", {"kind": None}) == {"kind": None}
        assert not _refused(endpoint.url)
