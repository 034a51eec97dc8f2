"""Back-dated outbox history for the retention and erasure tests: rows of every status, with every
table that refers to a row filled (events, attachments, message options, provider events, provider
state, a suppression entry), and the checks that nothing refers to a deleted row."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from tests.conftest import db_now, set_clock
from tests.support.helpers import token


@dataclass(frozen=True)
class History:
    """The ids of one back-dated set, by status, and the addresses it used."""

    sent: int
    failed: int
    unknown: int
    pending: int
    retrying: int
    processing: int
    cc_address: str

    def terminal(self) -> list[int]:
        return [self.sent, self.failed]

    def kept(self) -> list[int]:
        return [self.unknown, self.pending, self.retrying, self.processing]


def whole_message(to: str, cc: str, subject: str = "Your invoice") -> str:
    return json.dumps(
        {
            "to": [f"Customer <{to}>"],
            "cc": [cc],
            "bcc": ["archive@example.com"],
            "reply_to": ["Support <help@example.com>"],
            "subject": subject,
            "text": f"Dear customer {to}, your invoice is attached.",
            "html": "<p>Your invoice is attached.</p>",
            "headers": {"X-Order": "42"},
            "attachments": [
                {
                    "filename": "invoice.pdf",
                    "content_type": "application/pdf",
                    "content_base64": base64.b64encode(b"%PDF-1.4 invoice").decode(),
                }
            ],
        }
    )


def claim(repo: OutboxRepository, attempt_id: int) -> str:
    claim_token = token()
    assert repo.try_claim(attempt_id, claim_token, "history-worker", 3600) == 1
    return claim_token


def record_event(
    repo: OutboxRepository,
    event_type: str,
    message_id: str,
    attempt_id: int,
    recipient: str,
    at: datetime,
    kind: str | None = None,
) -> None:
    """An SES event for a sent row, its detail naming the recipient as SES's diagnostics do."""
    repo.record_provider_event(
        event_type=event_type,
        ses_message_id=message_id,
        outbox_id=str(attempt_id),
        recipient=recipient,
        event_at=at,
        kind=kind,
        subkind="General" if kind else None,
        detail=f"smtp; 550 5.1.1 <{recipient}>: user unknown",
        recorded_by="test",
    )


def make_history(repo: OutboxRepository, when: datetime, tag: str) -> History:
    """One row of each status, every change made at `when` on this session's clock."""
    set_clock(repo, when)
    try:
        cc = f"cc-{tag}@example.com"
        sent = repo.enqueue_message(f"{tag}-sent", whole_message(f"to-{tag}@example.com", cc)).attempt_id
        assert sent is not None
        message_id = f"ses-{tag}-{token()[:8]}"
        assert repo.finalize_sent(sent, claim(repo, sent), message_id) == 1
        record_event(repo, "Delivery", message_id, sent, f"to-{tag}@example.com", when)
        record_event(repo, "Bounce", message_id, sent, cc, when, kind="Permanent")

        def plain(suffix: str) -> int:
            attempt_id = repo.enqueue(
                f"{tag}-{suffix}", f"{suffix}-{tag}@example.com", f"{suffix} {tag}", text_body="hello"
            ).attempt_id
            assert attempt_id is not None
            return attempt_id

        failed = plain("failed")
        repo.finalize_failure(
            failed, claim(repo, failed), permanent=True, error_code="MessageRejected", error_message="no",
            retry_delay_seconds=0,
        )  # fmt: skip
        unknown = plain("unknown")
        assert repo.finalize_unknown(unknown, claim(repo, unknown), "read timeout") == 1
        pending = plain("pending")
        retrying = plain("retrying")
        repo.finalize_failure(
            retrying, claim(repo, retrying), permanent=False, error_code="Throttling", error_message="slow down",
            retry_delay_seconds=3600,
        )  # fmt: skip
        processing = plain("processing")
        claim(repo, processing)
    finally:
        set_clock(repo, None)
    history = History(sent, failed, unknown, pending, retrying, processing, cc)
    statuses = {repo.get_row(i).status for i in (sent, failed, unknown, pending, retrying, processing)}
    assert statuses == set(Status), statuses
    return history


def days_ago(repo: OutboxRepository, days: float) -> datetime:
    return db_now(repo) - timedelta(days=days)


def rows(repo: OutboxRepository, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    cursor = repo.connection.cursor()
    cursor.execute(sql, args)
    result = list(cursor.fetchall())
    cursor.close()
    return result  # type: ignore[return-value]


def tables_referring_to_rows(repo: OutboxRepository) -> list[tuple[str, str]]:
    """Every (table, column) of this schema that holds an email's id, whoever added it."""
    return [
        (str(t), str(c))
        for t, c in rows(
            repo,
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            " AND COLUMN_NAME = 'attempt_id' AND TABLE_NAME <> 'email_delivery_attempts'",
        )
    ]


def orphans(repo: OutboxRepository) -> dict[str, int]:
    """Per table, the rows that refer to an email that no longer exists (expected: none)."""
    found = {}
    for table, column in tables_referring_to_rows(repo):
        ((count,),) = rows(
            repo,
            f"SELECT COUNT(*) FROM `{table}` t WHERE t.`{column}` IS NOT NULL AND NOT EXISTS"
            f" (SELECT 1 FROM email_delivery_attempts a WHERE a.id = t.`{column}`)",
        )
        found[table] = int(count)
    return found


def references(repo: OutboxRepository, attempt_id: int) -> dict[str, int]:
    """Per table, the rows that refer to one email."""
    return {
        table: int(rows(repo, f"SELECT COUNT(*) FROM `{table}` WHERE `{column}` = %s", (attempt_id,))[0][0])
        for table, column in tables_referring_to_rows(repo)
    }


def text_columns(repo: OutboxRepository) -> list[tuple[str, str]]:
    """Every column of every table in this schema that can hold text (or bytes)."""
    return [
        (str(t), str(c))
        for t, c in rows(
            repo,
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            " AND DATA_TYPE IN ('char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext', 'json',"
            " 'enum', 'set', 'binary', 'varbinary', 'tinyblob', 'blob', 'mediumblob', 'longblob')"
            " AND EXTRA NOT LIKE '%GENERATED%'",
        )
    ]


def where_text_appears(repo: OutboxRepository, text: str) -> list[str]:
    """table.column for every column that holds `text` in any letter case (expected: none)."""
    found = []
    for table, column in text_columns(repo):
        ((count,),) = rows(
            repo,
            f"SELECT COUNT(*) FROM `{table}` WHERE LOCATE(%s, LOWER(CONVERT(`{column}` USING utf8mb4))"
            " COLLATE utf8mb4_bin) > 0",
            (text.lower(),),
        )
        if count:
            found.append(f"{table}.{column}")
    return found
