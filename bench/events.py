"""Events recorded per second from a backlog: SES event records, in their SNS
envelopes, through the same Ingestor `email-outbox events` uses (parse, one transaction per batch of
messages, commit), against a private server with a durable commit (innodb_flush_log_at_trx_commit=1).

The backlog: for each of N emails (Sent, known MessageId, outbox_id tag; 2% of them UnknownOutcome), a
Send and a Delivery event, and a permanent Bounce for 1 email in 50. Printed: events/s for batches of
1 message (a commit per event), of 100 messages (the consumer's default), four replicas of 100 at
once, and the replay of the whole backlog (every event a duplicate).

    python bench/events.py            # 5,000 emails, ~10,200 events
    python bench/events.py --tiny     # the form `make test` runs
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import mysql.connector

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.events import Ingestor
from email_outbox_devtools.dbserver import PrivateServer
from email_outbox_devtools.localdb import migrate_for_local_use
from email_outbox_devtools.ses_events import record, sns_notification

DIGITS = "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
SENT_AT = datetime(2026, 12, 1, 9, 0, 0)


def make_database(server: PrivateServer, name: str, emails: int) -> DatabaseDsn:
    conn = mysql.connector.connect(host="127.0.0.1", port=server.port, user="root", autocommit=True)
    cursor = conn.cursor()
    cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    dsn = DatabaseDsn.parse(server.dsn(name))
    migrate_for_local_use(dsn)
    cursor.execute(f"USE {name}")
    # id n+1 is email n: Sent with MessageId ses-n, except every 50th (UnknownOutcome, no MessageId).
    cursor.execute(
        "INSERT INTO email_delivery_attempts (notification_id, to_address, subject, text_body, status,"
        " attempt_count, max_attempts, next_attempt_at, provider_message_id, sent_at, created_at, updated_at)"
        " SELECT CONCAT('bench-', n), CONCAT('u', n, '@example.com'), 's', 'x',"
        "  IF(n % 50 = 7, 'UnknownOutcome', 'Sent'), 1, 5, UTC_TIMESTAMP(6), IF(n % 50 = 7, NULL, CONCAT('ses-', n)),"
        "  UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)"
        f" FROM (SELECT a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d AS n FROM {DIGITS} a, {DIGITS} b,"
        f" {DIGITS} c, {DIGITS} e, {DIGITS} f) seq WHERE n < %s ORDER BY n",
        (emails,),
    )
    conn.close()
    return dsn


def backlog(emails: int) -> list[str]:
    messages = []
    for n in range(emails):
        to, tag = f"u{n}@example.com", str(n + 1)
        sent_at = SENT_AT + timedelta(milliseconds=n)
        kinds = [("Send", 0.0), ("Delivery", 1.0)] + ([("Bounce", 2.0)] if n % 50 == 3 else [])
        for event_type, after in kinds:
            rec = record(event_type, f"ses-{n}", to, tag, sent_at, after=after)
            messages.append(json.dumps(sns_notification(rec)))
    return messages


def run(dsn: DatabaseDsn, messages: list[str], batch: int, replicas: int) -> tuple[float, int, Ingestor]:
    """Seconds to ingest `messages` with `replicas` threads of `batch` messages; events recorded."""
    shares = [messages[i::replicas] for i in range(replicas)]
    ingestors = [Ingestor(OutboxRepository.open(dsn), f"bench-{i}") for i in range(replicas)]

    def work(ingestor: Ingestor, share: list[str]) -> None:
        for start in range(0, len(share), batch):
            ingestor.ingest(share[start : start + batch])

    threads = [threading.Thread(target=work, args=pair) for pair in zip(ingestors, shares, strict=True)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    for i in ingestors[1:]:
        ingestors[0].tally.recorded += i.tally.recorded
        ingestors[0].tally.duplicates += i.tally.duplicates
        ingestors[0].tally.deadlock_retries += i.tally.deadlock_retries
        ingestors[0].tally.resolved.update(i.tally.resolved)
        ingestors[0].tally.suppressed += i.tally.suppressed
    for i in ingestors:
        i.repo.close()
    return elapsed, ingestors[0].tally.recorded + ingestors[0].tally.duplicates, ingestors[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="300 emails: a smoke run")
    parser.add_argument("--emails", type=int, help="emails in the backlog (default 5,000; --tiny 300)")
    args = parser.parse_args(argv)
    emails = args.emails or (300 if args.tiny else 5_000)
    single = min(emails, 300 if args.tiny else 1_000)
    with tempfile.TemporaryDirectory(prefix="events-bench-") as base:
        server = PrivateServer(Path(base) / "db", durable=True)
        server.start()
        try:
            rows: list[tuple[str, int, float, Ingestor]] = []
            for label, batch, replicas, replay in (
                ("batch 1 (a commit per event)", 1, 1, False),
                ("batch 100, 1 replica", 100, 1, False),
                ("batch 100, 4 replicas", 100, 4, False),
                ("replay, batch 100 (all duplicates)", 100, 1, True),
            ):
                name = f"ev_{batch}_{replicas}"
                if not replay:
                    dsn = make_database(server, name, emails)
                messages = backlog(single if batch == 1 else emails)
                elapsed, events, ingestor = run(dsn, messages, batch, replicas)
                rows.append((label, events, elapsed, ingestor))
        finally:
            server.stop()
    print(
        f"SES events from a backlog: {emails:,} emails (Send + Delivery each, a permanent Bounce for 1 in 50),"
    )
    print("SNS envelopes, durable commits (innodb_flush_log_at_trx_commit=1)")
    print(
        f"{'run':<36} | {'events':>7} | {'seconds':>7} | {'events/s':>8} | {'resolved':>8} | {'suppressed':>10} | deadlock retries"
    )
    for label, events, elapsed, ingestor in rows:
        t = ingestor.tally
        print(
            f"{label:<36} | {events:>7,} | {elapsed:>7.2f} | {events / elapsed:>8,.0f} |"
            f" {sum(t.resolved.values()):>8} | {t.suppressed:>10} | {t.deadlock_retries}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
