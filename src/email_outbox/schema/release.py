"""Which release last migrated the database: recorded by every `migrate` (the post-apply step) in the
one row of email_outbox_release (migration 0021), and read first so that an older package never
migrates a database a newer one has migrated (it would put its older procedures back)."""

from __future__ import annotations

from typing import Any

from email_outbox.errors import MigrationError
from email_outbox.version import PACKAGE_VERSION, SchemaRelease

TABLE = "email_outbox_release"


def recorded_release(conn: Any) -> str | None:
    """The version the last `migrate` recorded; None before migration 0021 or before any record."""
    cursor = conn.cursor()
    try:
        cursor.execute(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s",
            (TABLE,),
        )
        if not cursor.fetchone()[0]:
            return None
        cursor.execute(f"SELECT contract_version FROM {TABLE} WHERE id = 1")
        row = cursor.fetchone()
        return None if row is None else str(row[0])
    finally:
        cursor.close()


def refuse_a_newer_schema(conn: Any) -> None:
    """MigrationError when a newer release migrated this database."""
    release = SchemaRelease(recorded_release(conn))
    if release.state == "newer":
        raise MigrationError(
            f"the database was migrated by email-outbox {release.database}, newer than this package"
            f" ({PACKAGE_VERSION}): migrating would put older procedures back; upgrade email-outbox"
        )


def record_release_step(conn: Any) -> None:
    """The yoyo post-apply step: this package's version is the database's now."""
    cursor = conn.cursor()
    try:
        cursor.execute(
            f"INSERT INTO {TABLE} (id, contract_version, migrated_at) VALUES (1, %s, UTC_TIMESTAMP(6))"
            " ON DUPLICATE KEY UPDATE contract_version = VALUES(contract_version), migrated_at = VALUES(migrated_at)",
            (PACKAGE_VERSION,),
        )
        conn.commit()
    finally:
        cursor.close()
