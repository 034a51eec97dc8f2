"""The feed's rows go with their emails (issue 40): `email_retention` deletes an email's
`email_changes_feed` rows with its events, found by this index on `attempt_id`, so the feed does not
keep growing after the history it points at is gone. Built online; checked first, so it runs again.
"""

from typing import Any

from yoyo import step

from email_outbox.schema.migrate import add_index_if_missing

__depends__ = {"0019_changes_feed"}

__transactional__ = False


def add_index(conn: Any) -> None:
    add_index_if_missing(conn, "email_changes_feed", "ix_email_changes_feed_attempt", "(attempt_id)")


steps = [step(add_index)]
