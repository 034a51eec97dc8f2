"""email_outbox.django.EmailBackend in a real Django project (tests/django_project: settings, an app with
a model) on a real server, with Django's MySQL backend through mysqlclient and through PyMySQL: what the
application enqueues inside transaction.atomic() is kept or rolled back with its business change, and a
real worker delivers everything Django's message carried to the local SES endpoint."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("django", reason="Django is not installed (the test extra has it)")

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.ses_endpoint import SesEndpoint
from tests.support.harness import TestServer
from tests.support.worker_harness import drained, spawn_worker, wait_until

ROOT = Path(__file__).resolve().parents[2]
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture
def endpoint() -> Iterator[SesEndpoint]:
    with SesEndpoint() as ep:
        yield ep


def run_scenario(dsn: DatabaseDsn, driver: str, tmp_path: Path) -> dict[str, Any]:
    attachment = tmp_path / "Rechnung März.pdf"
    attachment.write_bytes(b"%PDF-1.4 fake")
    env = {
        **os.environ,
        "EO_DJANGO_DRIVER": driver,
        "EO_DJANGO_NAME": dsn.database,
        "EO_DJANGO_USER": dsn.user,
        "EO_DJANGO_PASSWORD": dsn.password,
        "EO_DJANGO_HOST": dsn.unix_socket or dsn.host,
        "EO_DJANGO_PORT": "" if dsn.unix_socket else str(dsn.port),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.django_project.scenario", str(attachment)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("driver", ["mysqlclient", "pymysql"])
def test_a_django_application_enqueues_in_its_transaction_and_everything_arrives_at_ses(
    driver: str,
    server: TestServer,
    dsn: DatabaseDsn,
    repo: OutboxRepository,
    endpoint: SesEndpoint,
    tmp_path: Path,
) -> None:
    if driver == "mysqlclient":
        pytest.importorskip("MySQLdb", reason="mysqlclient is not installed (it needs libmariadb-dev)")
    admin = server.admin_connection(dsn.database)
    admin.cursor().execute("DROP TABLE IF EXISTS shop_order")
    admin.close()

    out = run_scenario(dsn, driver, tmp_path)

    assert (out["full"], out["again"], out["plain"], out["mass"], out["after_refusal"]) == (1, 1, 1, 2, 1)
    assert out["rolled_back_send"] == 1, "accepted inside the transaction that then rolled back"
    assert out["refusal"][:2] == ["InvalidAddress", 45003] and "to[0]" in out["refusal"][2]
    assert out["silent"] == 0
    assert out["orders"] == ["ann@example.com", "kept@example.com"]
    rows = repo._select("SELECT id, notification_id, to_address FROM email_delivery_attempts ORDER BY id")
    assert [r["to_address"] for r in rows] == [
        "ann@example.com", "plain@example.com", "m1@example.com", "m2@example.com", "good@example.com",
    ], "the rolled-back send left no row, the repeated order-1 no second one"  # fmt: skip
    assert rows[0]["notification_id"] == "order-1"
    assert all(str(r["notification_id"]).startswith("django-") for r in rows[1:])

    worker = spawn_worker(
        dsn, endpoint.url, tmp_path, "w", lease_seconds=6, ses_connect_timeout=1, ses_read_timeout=2
    )
    try:
        wait_until(lambda: drained(repo), 60, "the Django messages to be sent")
    finally:
        assert worker.terminate() == 0, worker.log()[-3000:]
    assert all(repo.get_row(int(r["id"])).status is Status.SENT for r in rows)

    by_id = {m.outbox_id: m.request for m in endpoint.accepted()}
    sent = by_id[str(rows[0]["id"])]
    assert sent["FromEmailAddress"] == "Shop <shop@example.com>", "DEFAULT_FROM_EMAIL"
    assert sent["Destination"] == {
        "ToAddresses": ["Ann Lee <ann@example.com>"],
        "CcAddresses": ["carl@example.com"],
        "BccAddresses": ["audit@example.com"],
    }
    assert sent["ReplyToAddresses"] == ["Support <help@example.com>"]
    simple = sent["Content"]["Simple"]
    assert simple["Subject"]["Data"] == "Order 1 🧾"
    assert simple["Body"]["Text"]["Data"] == "Thanks — plain text."
    assert simple["Body"]["Html"]["Data"] == '<p>Thanks</p><img src="cid:logo@example.com">'
    assert {h["Name"]: h["Value"] for h in simple["Headers"]} == {"X-Order": "1"}, "the id header is not sent"
    got = [(a["FileName"], a["ContentType"], a["ContentDisposition"], a.get("ContentId"),
            base64.b64decode(a["RawContent"])) for a in simple["Attachments"]]  # fmt: skip
    assert got == [
        ("notes.txt", "text/plain", "ATTACHMENT", None, "a text attachment ✓".encode()),
        ("data.bin", "application/octet-stream", "ATTACHMENT", None, bytes(range(256))),
        ("Rechnung März.pdf", "application/pdf", "ATTACHMENT", None, b"%PDF-1.4 fake"),
        ("logo.png", "image/png", "INLINE", "logo@example.com", PIXEL),
        ("part-5.txt", "text/plain", "ATTACHMENT", None, b"a MIME part"),
    ]
    other = by_id[str(rows[3]["id"])]
    assert other["FromEmailAddress"] == "Other <shop@example.com>", "a message's own from_email"
