"""A database set up for local use (tests, the demo, the soak, the benchmarks): migrated, and with the
example domain on the sender allow-list and one configuration set messages may name, as an operator
would add real ones."""

from __future__ import annotations

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.schema.migrate import MigrateReport, migrate

LOCAL_SENDER_DOMAIN = "@example.com"
LOCAL_CONFIGURATION_SET = "transactional"


def migrate_for_local_use(dsn: DatabaseDsn) -> MigrateReport:
    report = migrate(dsn)
    repo = OutboxRepository.open(dsn)
    try:
        repo.sender_add(LOCAL_SENDER_DOMAIN, "", "devtools", "the local demo and test sender domain")
        repo.configuration_set_add(LOCAL_CONFIGURATION_SET, "devtools", "the local demo and test set")
    finally:
        repo.close()
    return report
