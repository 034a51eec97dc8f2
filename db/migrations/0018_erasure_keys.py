"""Erasure keys with versions (issue 38): `email_outbox_keys`, the keys the tombstones of notification
ids and the suppression entries of erased addresses are HMAC-SHA256'd under, newest first.

- A new tombstone or erased-address entry is keyed by the newest key and names it (the tombstone's
  `key_id`, the entry's `#<id>:` prefix); a lookup tries every key the table still holds, so a key
  can be added (`email-outbox erasure-key rotate`) without losing what the older keys keyed.
- The 0014 secret (`email_outbox_secrets`) moves here as key 1, flagged `legacy`: entries written
  before 0.2.0 in its old form ('#' + SHA-256 of it and the address) are still found by it. The
  copy is made by the server (INSERT ... SELECT). The procedures read only `email_outbox_keys`; the
  old table stays until the next release, so the procedures a running migrate has not replaced yet
  still find it.
- A fresh installation's first key is made by the server: RANDOM_BYTES into a user variable, so no
  statement this migration sends holds it. Where the server has no RANDOM_BYTES (MariaDB before
  10.10), it is made here as 0014 did, and travels in the statement.
- `inner_pad`, `outer_pad`: the HMAC's key XORed with 0x36 and 0x5c (RFC 2104; a 32-byte key padded
  with zeros to SHA-256's 64-byte block), stored generated columns, so each lookup computes one HMAC
  per key and nothing per key bit. The server XORs integers, not strings: 8 bytes at a time.
- `email_notification_tombstones.key_id`: the key a tombstone was written under (NULL: before 0.2.0,
  a plain SHA-256 or key 1), so a key none refers to may be dropped.
- `email_erasures.address_hash` widened for the `#<id>:` prefix.

Idempotent: IF NOT EXISTS, each change only when missing.
"""

import secrets
from typing import Any

from yoyo import step

__depends__ = {"0014_retention"}

# MySQL-family DDL commits on its own (see 0014).
__transactional__ = False


def _pad(byte: str) -> str:
    word = int(byte * 8, 16)
    parts = [
        f"UNHEX(LPAD(HEX(CAST(CONV(HEX(SUBSTRING(secret, {8 * i + 1}, 8)), 16, 10) AS UNSIGNED) ^ {word}), 16, '0'))"
        for i in range(4)
    ]
    return f"CONCAT({', '.join(parts)}, UNHEX(REPEAT('{byte}', 32)))"


_KEYS_TABLE = f"""
CREATE TABLE IF NOT EXISTS email_outbox_keys (
  id          SMALLINT UNSIGNED NOT NULL AUTO_INCREMENT,
  secret      BINARY(32) NOT NULL,
  inner_pad   BINARY(64) AS ({_pad("36")}) STORED,
  outer_pad   BINARY(64) AS ({_pad("5C")}) STORED,
  -- 1: the 0014 secret, which also keyed the pre-0.2.0 form of erased addresses.
  legacy      TINYINT UNSIGNED NOT NULL DEFAULT 0,
  created_at  DATETIME(6) NOT NULL,
  created_by  VARCHAR(191) NOT NULL,
  db_account  VARCHAR(300) NOT NULL,
  reason      VARCHAR(2000) NOT NULL,
  -- When a newer key replaced it for writing; it is still read until it is dropped.
  retired_at  DATETIME(6) NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""


def _table_exists(cursor: Any, table: str) -> bool:
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
        (table,),
    )
    return bool(cursor.fetchone()[0])


def _column_type(cursor: Any, table: str, column: str) -> str | None:
    cursor.execute(
        "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
        " AND TABLE_NAME = %s AND COLUMN_NAME = %s",
        (table, column),
    )
    row = cursor.fetchone()
    return None if row is None else str(row[0])


def _first_key(conn: Any) -> None:
    cursor = conn.cursor()
    cursor.execute("SELECT COUNT(*) FROM email_outbox_keys")
    if cursor.fetchone()[0] == 0:
        if _table_exists(cursor, "email_outbox_secrets"):
            cursor.execute(
                "INSERT INTO email_outbox_keys (secret, legacy, created_at, created_by, db_account, reason)"
                " SELECT secret, 1, created_at, 'migrate', SESSION_USER(), 'the 0014 secret'"
                " FROM email_outbox_secrets WHERE name = 'erasure'"
            )
        cursor.execute("SELECT COUNT(*) FROM email_outbox_keys")
        if cursor.fetchone()[0] == 0:
            try:
                cursor.execute("SET @email_outbox_new_key = RANDOM_BYTES(32)")
            except Exception as exc:  # MariaDB before 10.10 has no RANDOM_BYTES: 1305
                if getattr(exc, "args", (None,))[0] not in (1305, 1064):
                    raise
                cursor.execute("SET @email_outbox_new_key = %s", (secrets.token_bytes(32),))
            cursor.execute(
                "INSERT INTO email_outbox_keys (secret, created_at, created_by, db_account, reason)"
                " VALUES (@email_outbox_new_key, UTC_TIMESTAMP(6), 'migrate', SESSION_USER(), 'the first key')"
            )
            cursor.execute("SET @email_outbox_new_key = NULL")
    conn.commit()
    cursor.close()


def _tombstone_key_id(conn: Any) -> None:
    cursor = conn.cursor()
    if _column_type(cursor, "email_notification_tombstones", "key_id") is None:
        cursor.execute("ALTER TABLE email_notification_tombstones ADD COLUMN key_id SMALLINT UNSIGNED NULL")
    if _column_type(cursor, "email_erasures", "address_hash") == "varchar(65)":
        cursor.execute(
            "ALTER TABLE email_erasures MODIFY address_hash VARCHAR(72) CHARACTER SET ascii NOT NULL"
        )
    cursor.close()


steps = [step(_KEYS_TABLE), step(_first_key), step(_tombstone_key_id)]
