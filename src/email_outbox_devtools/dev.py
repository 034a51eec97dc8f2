"""`make dev`: a private database and the local SES endpoint to try things by hand, until Ctrl-C.

It starts a private server (in .dev/, reused across runs; the dev database is created afresh each run),
migrates it, allows the example sender domain and configuration set (email_outbox_devtools.localdb),
creates the account everything connects as (every role of email-outbox grant, a password generated
each run), starts the local SES endpoint with a control port of its own, and prints the DSN, the
endpoint's URL, how to run a worker against them and how to inject each fault. SIGINT or SIGTERM stops
the endpoint and the server and exits 0.

The secrets go in files only their owner may read, in the state directory: the DSN (`dsn`, for
--dsn-file and EMAIL_OUTBOX_DSN_FILE), the control API's bearer token (`ses-control-token`, and
`ses-control.header` for curl -H @FILE), and the password the first run gives the server's root
(`db/root-password`; remove `db/` to start from nothing). The commands printed read those files, so no password or
token sits in a process's argv; the DSN and the token are printed once, for a person at the terminal.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import threading
from pathlib import Path

import mysql.connector

from email_outbox.db.dsn import DSN_FILE_ENV, DatabaseDsn
from email_outbox.schema.grants import ER_CANNOT_USER, ROLES, Account, apply_grants
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import LOCAL_SENDER_DOMAIN, migrate_for_local_use
from email_outbox_devtools.ses_endpoint import FAULT_KINDS, SesEndpoint, write_secret
from email_outbox_devtools.worker_process import DEFAULT_FROM

DATABASE = "email_outbox_dev"
# Loopback only: the server skips name resolution, so a TCP client from 127.0.0.1 matches this host.
DEV_ACCOUNT = Account("email_outbox_dev", "127.0.0.1")


def root_password_file(base: Path) -> Path:
    return base / "db" / "root-password"


def lock_root(server: PrivateServer, base: Path) -> None:
    """Give every root account of a server that has none a generated password, kept beside its data
    (mode 0600): anyone on the machine reaches loopback. Written before it is set, so a crash between
    the two leaves the password findable."""
    password = secrets.token_urlsafe(24)
    write_secret(root_password_file(base), password)
    conn = server.root_connection(autocommit=True)
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT user, host FROM mysql.user WHERE user = 'root'")
        for user, host in cursor.fetchall():
            try:
                cursor.execute(f"ALTER USER {Account(user, host).sql()} IDENTIFIED BY %s", (password,))
            except mysql.connector.Error as exc:
                # 1396: root@HOSTNAME, which a server started with --skip-name-resolve neither matches
                # nor alters: no client can log in as it.
                if exc.errno != ER_CANNOT_USER:
                    raise
    finally:
        conn.close()
    server.root_password = password


def create_dev_account(server: PrivateServer, database: str) -> DatabaseDsn:
    """The account `make dev` prints, with every role `email-outbox grant` gives and a password new
    this run (the account of an earlier run is dropped first, with its password)."""
    password = secrets.token_urlsafe(24)
    conn = server.root_connection(autocommit=True)
    try:
        cursor = conn.cursor()
        cursor.execute(f"DROP USER IF EXISTS {DEV_ACCOUNT.sql()}")
        first, *rest = ROLES
        apply_grants(cursor, first, DEV_ACCOUNT, database, create_password=password)
        for role in rest:
            apply_grants(cursor, role, DEV_ACCOUNT, database)
    finally:
        conn.close()
    return DatabaseDsn.parse(server.dsn(database, DEV_ACCOUNT.user, password))


def fault_help(control_url: str, header_file: Path) -> list[str]:
    """One command per fault the endpoint can inject, as an operator would type it."""
    put = f"curl -s -H @{header_file} -X PUT {control_url}/_control"
    get = f"curl -s -H @{header_file}"
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
        (f"{get} -X POST {control_url}/_control/release", "let the sends hold_after_accept holds go"),
        (f"{get} {control_url}/_control/accepted", "what the endpoint accepted"),
    ]
    return [
        "Faults (the control port stays open through every outage; it answers 401 without the token):",
        *(f"  {command}    # {what}" for command, what in commands),
        "  A fault rule's fields: kind, remaining (null: every send), probability, match (a substring of",
        "  the recipient), seconds, status, code. Mail to a local part starting 'reject' is rejected.",
    ]


def run(base: Path, ses_port: int, control_port: int) -> int:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    root_file = root_password_file(base)
    server = PrivateServer(base / "db")
    if root_file.exists():
        server.root_password = root_file.read_text().strip()
    endpoint = SesEndpoint(ses_port, control_port=control_port)
    try:
        print(f"starting a private {Path(server.binary).name} in {server.base_dir}", flush=True)
        server.start()
        if not root_file.exists():
            lock_root(server, base)
        conn = server.root_connection(autocommit=True)
        cur = conn.cursor()
        cur.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cur.execute(f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        conn.close()
        migrate_for_local_use(DatabaseDsn.parse(server.dsn(DATABASE, "root", server.root_password)))
        dsn = create_dev_account(server, DATABASE)
        dsn_file, token_file, header_file = (
            base / "dsn",
            base / "ses-control-token",
            base / "ses-control.header",
        )
        write_secret(dsn_file, dsn.url())
        write_secret(token_file, endpoint.control_token)
        write_secret(header_file, f"Authorization: Bearer {endpoint.control_token}")
        endpoint.start()
        lines = [
            "",
            f"DSN         {dsn.url()}",
            f"DSN-file    {dsn_file}",
            f"SES         {endpoint.url}",
            f"control     {endpoint.control_url}",
            f"token       {endpoint.control_token}",
            f"token-file  {token_file}",
            f"senders     *{LOCAL_SENDER_DOMAIN} allowed",
            "",
            f"The DSN and the token are printed here only: commands read them from {base}",
            "(mode 0600), so neither sits in a process's argv.",
            "",
            "A worker against them:",
            f"  {DSN_FILE_ENV}={dsn_file} EMAIL_OUTBOX_DEFAULT_FROM={DEFAULT_FROM} \\",
            f"  AWS_ENDPOINT_URL_SESV2={endpoint.url} AWS_REGION=us-east-1 \\",
            "  AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \\",
            "  .venv/bin/email-outbox worker --metrics-port 9108",
            "An email:",
            f"  .venv/bin/email-outbox enqueue --dsn-file {dsn_file} --notification-id hello-1 \\",
            "  --to ann@example.com \\",
            f"  --from {DEFAULT_FROM} --subject hello --text 'Hello Ann'",
            "",
            *fault_help(endpoint.control_url, header_file),
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
