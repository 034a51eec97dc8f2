"""`make dev`: a private database and the local SES endpoint to try things by hand, until Ctrl-C.

It starts a private server (in .dev/, reused across runs; the dev database is created afresh each run),
migrates it, allows the example sender domain and configuration set (email_outbox_devtools.localdb),
starts the local SES endpoint with a control port of its own, and prints the DSN, the endpoint's URL,
how to run a worker against them and how to inject each fault. SIGINT or SIGTERM stops the endpoint
and the server and exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import LOCAL_SENDER_DOMAIN, migrate_for_local_use
from email_outbox_devtools.ses_endpoint import FAULT_KINDS, SesEndpoint
from email_outbox_devtools.worker_process import DEFAULT_FROM

DATABASE = "email_outbox_dev"


def fault_help(control_url: str) -> list[str]:
    """One command per fault the endpoint can inject, as an operator would type it."""
    put = f"curl -s -X PUT {control_url}/_control"
    commands = [
        (f'{put}/outage -d \'{{"kind": "503"}}\'', "every SendEmail answers 503 ServiceUnavailable"),
        (f'{put}/outage -d \'{{"kind": "refused"}}\'', "the endpoint refuses connections"),
        (f"{put}/outage -d '{{\"kind\": null}}'", "the outage ends"),
        (f"{put}/quota -d '{{\"sandbox\": true}}'", "GetAccount answers as a sandbox account (1/s, 200/day)"),
        (f'{put}/quota -d \'{{"get_account": "deny"}}\'', "GetAccount answers 403 AccessDenied"),
        (f"{put}/quota -d '{{\"max_24_hour_send\": 10}}'", "a daily quota that runs out"),
        *(
            (f'{put}/faults -d \'[{{"kind": "{kind}", "remaining": 1}}]\'', f"the next send meets {kind}")
            for kind in FAULT_KINDS
        ),
        (f"{put}/faults -d '[]'", "no more fault rules"),
        (f"curl -s -X POST {control_url}/_control/release", "let the sends hold_after_accept holds go"),
        (f"curl -s {control_url}/_control/accepted", "what the endpoint accepted"),
    ]
    return [
        "Faults (the control port stays open through every outage):",
        *(f"  {command}    # {what}" for command, what in commands),
        "  A fault rule's fields: kind, remaining (null: every send), probability, match (a substring of",
        "  the recipient), seconds, status, code. Mail to a local part starting 'reject' is rejected.",
    ]


def run(base: Path, ses_port: int, control_port: int) -> int:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    server = PrivateServer(base / "db")
    endpoint = SesEndpoint(ses_port, control_port=control_port)
    try:
        print(f"starting a private {Path(server.binary).name} in {server.base_dir}", flush=True)
        server.start()
        conn = mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        conn.close()
        dsn = DatabaseDsn.parse(server.dsn(DATABASE))
        migrate_for_local_use(dsn)
        endpoint.start()
        lines = [
            "",
            f"DSN         {dsn.url()}",
            f"SES         {endpoint.url}",
            f"control     {endpoint.control_url}",
            f"senders     *{LOCAL_SENDER_DOMAIN} allowed",
            "",
            "A worker against them:",
            f"  EMAIL_OUTBOX_DSN={dsn.url()} EMAIL_OUTBOX_DEFAULT_FROM={DEFAULT_FROM} \\",
            f"  AWS_ENDPOINT_URL_SESV2={endpoint.url} AWS_REGION=us-east-1 \\",
            "  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \\",
            "  .venv/bin/email-outbox worker --metrics-port 9108",
            "An email:",
            f"  .venv/bin/email-outbox enqueue --dsn {dsn.url()} --to ann@example.com \\",
            f"  --from {DEFAULT_FROM} --subject hello --text 'Hello Ann'",
            "",
            *fault_help(endpoint.control_url),
            "",
            "Ctrl-C stops the endpoint and the database.",
        ]
        print("\n".join(lines), flush=True)
        stop.wait()
        print("stopping", flush=True)
        return 0
    finally:
        if endpoint.thread.is_alive():
            endpoint.stop()
        server.stop()
        print("stopped", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", default=os.environ.get("EMAIL_OUTBOX_DEV_DIR", ".dev"), help="state directory"
    )
    parser.add_argument(
        "--ses-port", type=int, default=0, help="the SES endpoint's port (default: a free one)"
    )
    parser.add_argument("--control-port", type=int, default=0, help="the control port (default: a free one)")
    args = parser.parse_args(argv)
    base = Path(args.dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    return run(base, args.ses_port, args.control_port)


if __name__ == "__main__":
    sys.exit(main())
