"""The release that last migrated this database (issue 41): `email_outbox_release`, one row (id 1)
with the package version (`contract_version`, the SQL contract's semantic version) and when
(`migrated_at`, UTC). The post-apply step of every `migrate` writes it (email_outbox.schema.release);
`email-outbox status` compares it with the installed package, and `migrate` refuses a database a
newer release has migrated. Operators read it (`email-outbox grant operator` again).

Idempotent: IF NOT EXISTS.
"""

from yoyo import step

__depends__ = {"0015_claim_queue"}

# MySQL-family DDL commits on its own (see 0014).
__transactional__ = False

steps = [
    step(
        """
CREATE TABLE IF NOT EXISTS email_outbox_release (
  id               TINYINT UNSIGNED NOT NULL,
  contract_version VARCHAR(64) NOT NULL,
  migrated_at      DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  CONSTRAINT ck_email_outbox_release_one_row CHECK (id = 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci
"""
    ),
]
