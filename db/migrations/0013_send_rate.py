"""One send rate and one daily quota for the whole SES account, shared by every worker replica of this
database (docs/design.md, "One send rate for the account").

`email_send_rate` holds one row (id 1): the account's quota as a worker last read it from SES's
GetAccount (or from an operator's override, or the conservative default), the schedule every replica
takes its slices of sends from (`next_slice_at`), what was handed out since the last read (the daily
count), and a throttling cut that recovers with time. Only the procedures email_send_rate_* change it.

The row starts at the conservative default (1 send/s, 200 a day: an SES sandbox account, the smallest
there is) until the first worker reports what SES says. Idempotent: IF NOT EXISTS and INSERT IGNORE, so
a migrator killed mid-way simply runs again, and an upgraded installation keeps every row it had.
"""

from typing import Any

from yoyo import step

from email_outbox.db.send_rate_calls import INITIAL_SEND_RATE_ROW

__depends__ = {"0001_schema"}

# MySQL-family DDL commits on its own; the steps are idempotent instead (see 0004).
__transactional__ = False


def insert_first_row(conn: Any) -> None:
    # Outside a transaction yoyo commits nothing itself: DDL commits on its own, an INSERT does not.
    cursor = conn.cursor()
    cursor.execute(INITIAL_SEND_RATE_ROW)
    cursor.close()
    conn.commit()


steps = [
    step(
        """
CREATE TABLE IF NOT EXISTS email_send_rate (
  id                   TINYINT UNSIGNED NOT NULL,
  -- What the account allows, sends per second, and where that figure came from: ses, override, default.
  account_rate         DOUBLE NOT NULL,
  rate_source          VARCHAR(16) NOT NULL,
  -- What slices are handed out at: a little under account_rate (the reporting worker's policy).
  pace_rate            DOUBLE NOT NULL,
  -- Max24HourSend (NULL: no daily limit known) and its source; SentLast24Hours at the last read.
  daily_quota          BIGINT NULL,
  daily_source         VARCHAR(16) NULL,
  sent_at_report       BIGINT NOT NULL DEFAULT 0,
  -- Sends handed out since then, less those a replica reported unused, and since when it counts.
  granted_since_report BIGINT NOT NULL DEFAULT 0,
  counted_since        DATETIME(6) NOT NULL,
  reported_at          DATETIME(6) NULL,
  reported_by          VARCHAR(191) NULL,
  -- The replica whose turn it is to read GetAccount again took that turn at this time.
  refresh_taken_at     DATETIME(6) NULL,
  -- The schedule: the next slice of sends starts no earlier than this.
  next_slice_at        DATETIME(6) NOT NULL,
  -- After SES throttled: the rate cut to, when, and how long it takes to grow back to pace_rate.
  throttled_rate       DOUBLE NULL,
  throttled_at         DATETIME(6) NULL,
  recover_seconds      DOUBLE NOT NULL DEFAULT 30,
  row_version          BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
    step(insert_first_row),
]
