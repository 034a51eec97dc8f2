"""The operator console on a big table: response times of the overview, the lists and the
searches with 1,000,000 rows, through the whole stack (authentication, the queries, the templates).

Fills a private server with 1,000,000 rows (mostly Sent over 30 days, some Failed, Pending and
UnknownOutcome), then requests each page repeatedly through Starlette's test client and prints the
median and 95th percentile. The goal is under 200 ms each.

    python bench/console.py            # 1,000,000 rows (a few minutes)
    python bench/console.py --tiny     # 20,000 rows: the form `make test` runs
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import mysql.connector

from email_outbox.console.app import ConsoleSettings, create_app
from email_outbox.console.auth import BasicAuth
from email_outbox.console.pool import ConsoleDatabase
from email_outbox.console.users import UsersFile, add_user
from email_outbox.db.dsn import DatabaseDsn
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import migrate_for_local_use

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Starlette's note that its test client will move off httpx
    from starlette.testclient import TestClient

DIGITS = "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
GOAL_MS = 200.0


def fill(server: PrivateServer, database: str, rows: int) -> None:
    """`rows` rows in chunks of up to 100,000: of every 1,000, one UnknownOutcome, four Failed, five
    Pending and the rest Sent, sent over the last 30 days; 50,000 recipients over 100 domains."""
    conn = mysql.connector.connect(
        host="127.0.0.1", port=server.port, user="root", database=database, autocommit=True
    )
    cursor = conn.cursor()
    done = 0
    while done < rows:
        chunk = min(100_000, rows - done)
        cursor.execute(
            "INSERT INTO email_delivery_attempts (notification_id, to_address, subject, text_body, status,"
            " attempt_count, max_attempts, next_attempt_at, last_error_code, provider_message_id, sent_at,"
            " created_at, updated_at)"
            " SELECT CONCAT('order-', k, ':confirmation'), CONCAT('user', k MOD 50000, '@shop', k MOD 100, '.example.com'),"
            "  CONCAT('Your order ', k), REPEAT('x', 200), st, 1, 5, UTC_TIMESTAMP(6) - INTERVAL k MOD 2592000 SECOND,"
            "  IF(st = 'Failed', 'MessageRejected', IF(st = 'UnknownOutcome', 'AmbiguousOutcome', NULL)),"
            "  IF(st = 'Sent', CONCAT('0100-', k), NULL),"
            "  IF(st = 'Sent', UTC_TIMESTAMP(6) - INTERVAL k MOD 2592000 SECOND, NULL),"
            "  UTC_TIMESTAMP(6) - INTERVAL k MOD 2592000 SECOND, UTC_TIMESTAMP(6) - INTERVAL k MOD 2592000 SECOND"
            " FROM (SELECT %s + n AS k, CASE WHEN n MOD 1000 = 0 THEN 'UnknownOutcome' WHEN n MOD 1000 < 5 THEN 'Failed'"
            "  WHEN n MOD 1000 < 10 THEN 'Pending' ELSE 'Sent' END AS st"
            f"  FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d AS n FROM {DIGITS} a, {DIGITS} b,"
            f"  {DIGITS} c, {DIGITS} e, {DIGITS} f) seq WHERE n < %s) gen",
            (done, chunk),
        )
        done += chunk
    cursor.execute("ANALYZE TABLE email_delivery_attempts")
    cursor.fetchall()
    conn.close()


def timed(client: TestClient, url: str, repeat: int) -> tuple[float, float, str]:
    samples = []
    text = ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (url, response.status_code, response.text[:300])
        text = response.text
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return statistics.median(samples), p95, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="20,000 rows: a smoke run")
    parser.add_argument("--rows", type=int, help="rows to fill (default 1,000,000)")
    args = parser.parse_args(argv)
    rows = args.rows or (20_000 if args.tiny else 1_000_000)
    repeat = 5 if args.tiny else 30
    with tempfile.TemporaryDirectory(prefix="console-bench-") as base:
        server = PrivateServer(Path(base) / "db", extra_args=["--innodb-buffer-pool-size=1G"])
        server.start()
        try:
            conn = mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
            conn.cursor().execute("CREATE DATABASE bench CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
            conn.close()
            dsn = DatabaseDsn.parse(server.dsn("bench"))
            migrate_for_local_use(dsn)
            t0 = time.perf_counter()
            fill(server, "bench", rows)
            print(f"filled {rows:,} rows in {time.perf_counter() - t0:.1f} s")
            users = Path(base) / "users"
            add_user(users, "bench", "bench-password")
            database = ConsoleDatabase(dsn)
            database.start()
            app = create_app(
                ConsoleSettings(database=database, authenticator=BasicAuth(UsersFile.load(users)))
            )
            with TestClient(app) as client:
                client.auth = ("bench", "bench-password")
                client.get("/")  # warm: the password check, the pool, the templates
                first = client.get("/emails?status=Sent").text
                cursor = re.search(r'href="/emails\?cursor=(\d+)', first)
                deep = int(cursor.group(1)) // 2 if cursor else 1
                pages = [
                    ("overview", "/"),
                    ("overview fragment (live refresh)", "/fragments/overview"),
                    ("list Sent, first page", "/emails?status=Sent"),
                    ("list Sent, a page deep in the table", f"/emails?status=Sent&cursor={deep}"),
                    ("list UnknownOutcome", "/emails?status=UnknownOutcome"),
                    ("search notification_id prefix", "/emails?by=notification_id&q=order-4242"),
                    ("search recipient prefix (broad)", "/emails?by=recipient&q=user1"),
                    ("search recipient prefix (one)", "/emails?by=recipient&q=user4242@shop42"),
                    ("one email", "/emails/4242"),
                ]
                results = [(name, *timed(client, url, repeat)) for name, url in pages]
            database.close()
        finally:
            server.stop()
    print(f"\nconsole response times with {rows:,} rows ({repeat} requests each; goal < {GOAL_MS:.0f} ms)")
    print(f"{'page':<40} | {'rows shown':>10} | {'median (ms)':>11} | {'p95 (ms)':>8} | goal")
    for name, median, p95, text in results:
        shown = len(re.findall(r'<td><a href="/emails/\d+">', text))
        print(
            f"{name:<40} | {shown:>10} | {median:>11.1f} | {p95:>8.1f} | {'met' if p95 < GOAL_MS else 'MISSED'}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
