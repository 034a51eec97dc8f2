"""The console's door after the second security review (issue 25): the login limiter cannot lock the
real user out and counts per client behind the TLS proxy (finding 1), a trusted user header sent twice
is refused (finding 9), new password entries use scrypt N = 2^17 while old ones still verify, and the
console runs a bounded number of password checks at once (finding 10)."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from email_outbox.console.app import MAX_PASSWORD_CHECKS
from email_outbox.console.auth import BasicAuth, TrustedHeader
from email_outbox.console.login_limit import FailedLogins
from email_outbox.console.users import UsersFile, hash_password
from email_outbox.db.dsn import DatabaseDsn
from tests.support.console_support import PASSWORD, USER, ConsoleUnderTest, Served, make_console

PROXY = "10.0.0.5"


@pytest.fixture
def console(dsn: DatabaseDsn, tmp_path: Path) -> Iterator[ConsoleUnderTest]:
    made = make_console(dsn, tmp_path)
    yield made
    made.close()


def test_behind_the_trusted_proxy_failed_logins_count_per_client_address(console: ConsoleUnderTest) -> None:
    """Every user reaches the console through the proxy's address: a hundred guesses from one client
    must not hold up another, and the part of X-Forwarded-For a client writes itself is not believed."""
    console.settings.trusted_proxies = [ipaddress.ip_network("10.0.0.0/24")]
    console.settings.failures = FailedLogins(per_user=3, per_address=5)
    with TestClient(console.app, client=(PROXY, 4000)) as through_proxy:
        attacker = {"X-Forwarded-For": "203.0.113.66, 198.51.100.1"}  # the client wrote the first hop
        for i in range(5):
            assert through_proxy.get("/", auth=(f"name{i}", "guess"), headers=attacker).status_code == 401
        assert through_proxy.get("/", auth=("name-x", "guess"), headers=attacker).status_code == 429
        # The attacker's forged first hop is not its address: a fresh forged one changes nothing.
        forged = {"X-Forwarded-For": "203.0.113.99, 198.51.100.1"}
        assert through_proxy.get("/", auth=("name-y", "guess"), headers=forged).status_code == 429
        # The right password gets in even from the attacker's own address ...
        assert through_proxy.get("/", auth=(USER, PASSWORD), headers=attacker).status_code == 200
        # ... and another user behind the same proxy is a client of its own: a typo is a plain 401.
        colleague = {"X-Forwarded-For": "198.51.100.2"}
        assert through_proxy.get("/", auth=("bob", "typo"), headers=colleague).status_code == 401
    # Not from the proxy, the header is the client's own word and is ignored.
    with TestClient(console.app, client=("198.51.100.1", 4000)) as direct:
        spoofed = {"X-Forwarded-For": "198.51.100.77"}
        assert direct.get("/", auth=("name-z", "guess"), headers=spoofed).status_code == 429


class CountingUsers:
    """The real users file, counting how many password checks run at once."""

    def __init__(self, users: UsersFile) -> None:
        self.users, self.running, self.peak = users, 0, 0
        self.lock = threading.Lock()

    def verify(self, name: str, password: str) -> bool:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            return self.users.verify(name, password)
        finally:
            with self.lock:
                self.running -= 1


def test_a_parallel_burst_is_held_to_the_limit_and_to_a_bounded_number_of_checks_at_once(
    console: ConsoleUnderTest,
) -> None:
    users = CountingUsers(UsersFile.load(console.users_file))
    console.settings.authenticator = BasicAuth(users)  # type: ignore[arg-type]
    console.settings.failures = FailedLogins(per_user=2, per_address=4)
    with Served(console) as served, ThreadPoolExecutor(12) as pool:

        def guess(i: int) -> int:
            return httpx.get(f"{served.url}/", auth=(f"name{i}", "guess"), timeout=60).status_code

        codes = list(pool.map(guess, range(12)))
        assert codes.count(401) == 4, f"exactly the address limit is answered as a plain failure: {codes}"
        assert set(codes) <= {401, 429, 503}
        assert 1 <= users.peak <= MAX_PASSWORD_CHECKS, f"{users.peak} checks ran at once"
        # Right after the burst, the real user still gets in from the same address.
        assert httpx.get(f"{served.url}/", auth=(USER, PASSWORD), timeout=60).status_code == 200


def test_a_trusted_user_header_sent_twice_is_refused(console: ConsoleUnderTest) -> None:
    console.settings.authenticator = TrustedHeader("X-Forwarded-User", [ipaddress.ip_network("10.0.0.0/24")])
    with TestClient(console.app, client=(PROXY, 4000)) as through_proxy:
        assert through_proxy.get("/", headers={"X-Forwarded-User": "alice"}).status_code == 200
        twice = [("X-Forwarded-User", "alice"), ("X-Forwarded-User", "mallory")]
        assert through_proxy.get("/", headers=twice).status_code == 403
        assert through_proxy.get("/", headers=list(reversed(twice))).status_code == 403


def test_new_entries_use_scrypt_2_17_and_old_2_15_entries_still_log_in(
    dsn: DatabaseDsn, tmp_path: Path
) -> None:
    users = tmp_path / "users"
    added = subprocess.run(
        [sys.executable, "-m", "email_outbox.cli", "console-user", "add", "carol", "--users-file", str(users)],
        input="carol's passphrase\n", capture_output=True, text=True, timeout=60,
        env={**os.environ, "EMAIL_OUTBOX_DSN": dsn.url()},
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert users.read_text().startswith("carol:scrypt$131072$8$1$")
    with users.open("a") as file:
        file.write(f"{USER}:{hash_password(PASSWORD, n=2**15)}\n")
    made = make_console(dsn, tmp_path)
    try:
        made.settings.authenticator = BasicAuth(UsersFile.load(users))
        with TestClient(made.app) as client:
            assert client.get("/", auth=("carol", "carol's passphrase")).status_code == 200
            assert client.get("/", auth=(USER, PASSWORD)).status_code == 200, (
                "an old 2^15 line still verifies"
            )
            assert client.get("/", auth=(USER, "wrong")).status_code == 401
    finally:
        made.close()
