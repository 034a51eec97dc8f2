"""`make demo`: the whole job end to end on this machine, then everything it started is stopped.

A private database server (in .demo/, reused across runs; the demo database is dropped and created
afresh each run), the local SES endpoint, migrations, a few hundred emails (some to addresses the
endpoint rejects), three worker replicas until the outbox drains, and a summary.
"""

from __future__ import annotations

import base64
import os
import sys
import time
from pathlib import Path

import mysql.connector

from email_outbox import Attachment, Message, enqueue_message
from email_outbox.cli.main import main as operator_main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_endpoint import SesEndpoint
from email_outbox_devtools.worker_process import WorkerProcess, spawn_worker

EMAILS = 300
INVOICE = Message(
    sender="Demo Shop <shop@example.com>",
    to=["Ann Lee <ann@example.com>"],
    cc=["Bookkeeping <books@example.com>"],
    bcc=["archive@example.com"],
    reply_to=["Billing help <billing@example.com>"],
    subject="Invoice 1001",
    text="Hello Ann, your invoice is attached.",
    html="<p>Hello Ann, your invoice is attached.</p>",
    headers={
        "List-Unsubscribe": "<https://example.com/unsubscribe/ann>",
        "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    },
    tags={"kind": "invoice", "tenant": "demo"},
    attachments=[Attachment("invoice-1001.pdf", "application/pdf", b"%PDF-1.4 demo invoice 1001")],
)
REPLICAS = 3
# The local account's maximum send rate: high enough for a quick demo, low enough that sharing it shows.
ACCOUNT_SEND_RATE = 100
REJECT_EVERY = 25


def main() -> int:
    base = Path(os.environ.get("EMAIL_OUTBOX_DEMO_DIR", ".demo")).resolve()
    base.mkdir(parents=True, exist_ok=True)
    server = PrivateServer(base / "db")
    endpoint = SesEndpoint()
    workers: list[WorkerProcess] = []
    try:
        print(f"starting a private {Path(server.binary).name} in {server.base_dir}", flush=True)
        server.start()
        conn = mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
        cur = conn.cursor()
        cur.execute("DROP DATABASE IF EXISTS email_outbox_demo")
        cur.execute("CREATE DATABASE email_outbox_demo CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        conn.close()
        dsn = DatabaseDsn.parse(server.dsn("email_outbox_demo"))
        print(f"server {server.version()} on 127.0.0.1:{server.port}; migrating", flush=True)
        for line in migrate_for_local_use(dsn).lines()[-1:]:
            print(f"  {line}")
        endpoint.start()
        endpoint.set_quota(max_send_rate=ACCOUNT_SEND_RATE, max_24_hour_send=50000)
        print(
            f"local SES endpoint on {endpoint.url}; the account may send {ACCOUNT_SEND_RATE}/s and 50,000 a day"
            " (GetAccount), and the replicas share that rate through the database",
            flush=True,
        )

        repo = OutboxRepository.open(dsn)
        for i in range(EMAILS):
            local = f"reject-{i}" if i % REJECT_EVERY == 0 else f"customer-{i}"
            repo.enqueue(
                f"demo-order-{i}:confirmation",
                f"{local}@example.com",
                f"Your order #{i}",
                text_body=f"Thanks for order {i}.",
                html_body=f"<p>Thanks for order <b>{i}</b>.</p>",
            )
        print(
            f"enqueued {EMAILS} emails ({len(range(0, EMAILS, REJECT_EVERY))} to addresses the endpoint rejects)"
        )
        invoice_id = enqueue_message(repo.connection, "demo-invoice-1001", INVOICE).attempt_id
        assert invoice_id is not None, "a fresh demo database has no tombstones"
        print(
            f"enqueued 1 whole message (cc, bcc, reply-to, headers, tags, a PDF attachment) as id {invoice_id}"
        )

        logs = base / "logs"
        logs.mkdir(exist_ok=True)
        started = time.monotonic()
        workers += [
            spawn_worker(dsn, endpoint.url, logs, f"demo-worker-{n}", concurrency=8) for n in range(REPLICAS)
        ]
        print(f"{REPLICAS} worker replicas running (logs in {logs})", flush=True)
        while time.monotonic() - started < 300:
            counts = {s.status: s.count for s in repo.outbox_stats()}
            if counts[Status.PENDING] + counts[Status.RETRYING] + counts[Status.PROCESSING] == 0:
                break
            time.sleep(0.2)
        elapsed = time.monotonic() - started
        codes = [worker.terminate() for worker in workers]

        counts = {s.status: s.count for s in repo.outbox_stats()}
        accepted = endpoint.accepted_counts()
        print(f"\ndrained in {elapsed:.1f}s; workers exited with {codes}")
        print("status          count")
        for status in Status:
            print(f"{status.value:<15} {counts[status]:>5}")
        print(
            f"endpoint accepted {sum(accepted.values())} messages for {len(accepted)} outbox ids;"
            f" sent more than once: {sum(1 for c in accepted.values() if c > 1)}"
        )
        # What an operator sees afterwards: the status table, the rejected emails, one email's history.
        print_sent_message(endpoint, invoice_id)
        invoice_sent = repo.get_row(invoice_id).status is Status.SENT
        for command in (["status"], ["list", "--status", "Failed", "--limit", "3"], ["show", "2"]):
            print("\n$ email-outbox " + " ".join(command))
            operator_main([*command, "--dsn", dsn.url()])
        print()
        repo.close()
        ok = counts[Status.SENT] == len(accepted) == sum(accepted.values()) and all(c == 0 for c in codes)
        ok = ok and invoice_sent
        print("demo OK" if ok else "demo FAILED: the accounting does not add up")
        return 0 if ok else 1
    finally:
        for worker in workers:
            worker.kill()
        endpoint.stop() if endpoint.thread.is_alive() else None
        server.stop()


def print_sent_message(endpoint: SesEndpoint, attempt_id: int) -> None:
    """What SES was asked to send for the whole message, as the local endpoint recorded it."""
    (request,) = [m.request for m in endpoint.accepted() if m.outbox_id == str(attempt_id)]
    simple = request["Content"]["Simple"]
    print(f"\nwhat SES received for id {attempt_id}:")
    print(f"  From      {request['FromEmailAddress']}")
    for key, addresses in request["Destination"].items():
        print(f"  {key.removesuffix('Addresses'):<9} {', '.join(addresses)}")
    print(f"  Reply-To  {', '.join(request.get('ReplyToAddresses', []))}")
    print(f"  Subject   {simple['Subject']['Data']}")
    for header in simple.get("Headers", []):
        print(f"  header    {header['Name']}: {header['Value']}")
    print("  tags      " + ", ".join(f"{t['Name']}={t['Value']}" for t in request["EmailTags"]))
    for a in simple.get("Attachments", []):
        size = len(base64.b64decode(a["RawContent"]))
        print(f"  attached  {a['FileName']} ({a['ContentType']}, {size} bytes)")


if __name__ == "__main__":
    sys.exit(main())
