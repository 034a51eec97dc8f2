"""The second security review (issue 25): one test (or a few) per finding, each through the real
interface: CALL on the real server, the CLI as a process, HTTP against a running server. Findings 1, 9
and 10 (the console's door) are in tests/console/test_console_login.py, 2 in
tests/contract/test_notification_ids_per_account.py, 3 in tests/events/test_events.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from email_outbox.db.repository import OutboxRepository
from email_outbox.display import visible
from email_outbox.errors import InvalidInput
from tests.support.helpers import scalar


@pytest.fixture
def only_billing(repo: OutboxRepository) -> Iterator[OutboxRepository]:
    """An allow-list holding billing@example.com alone, put back as the session's fixture left it."""
    saved = repo.allowed_senders()
    for s in saved:
        repo.sender_remove(s.sender, s.account, "test", "emptied for one test")
    assert repo.sender_add("billing@example.com", "", "ops", "invoices") == 1
    yield repo
    for s in repo.allowed_senders():
        repo.sender_remove(s.sender, s.account, "test", "cleanup")
    for s in saved:
        repo.sender_add(s.sender, s.account, s.added_by, s.reason)


# --- finding 7: look-alike senders ------------------------------------------------------------------
LOOK_ALIKES = (
    "billing@ex\u00e4mple.com",  # a with diaeresis: utf8mb4_unicode_ci folds it to a
    "b\u00edlling@example.com",  # i with acute
    "billing\u200b@example.com",  # zero width space: reads as billing@example.com
    "billing\u00ad@example.com",  # soft hyphen
    "billing\ufeff@example.com",  # zero width no-break space
    "billing\u2060@example.com",  # word joiner
)


@pytest.mark.parametrize("sender", LOOK_ALIKES, ids=lambda s: visible(s))
def test_a_look_alike_of_an_allowed_sender_is_refused_and_writes_nothing(
    only_billing: OutboxRepository, sender: str
) -> None:
    repo = only_billing
    with pytest.raises(InvalidInput, match="from_address"):
        repo.enqueue("look-alike", "a@example.net", "s", text_body="t", from_address=sender)
    with pytest.raises(InvalidInput, match="from"):
        repo.enqueue_message(
            "look-alike-message",
            f'{{"from": "{sender}", "to": ["a@example.net"], "subject": "s", "text": "t"}}',
        )
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0
    # The real sender still passes.
    assert repo.enqueue(
        "real", "a@example.net", "s", text_body="t", from_address="Billing@example.com"
    ).affected


def test_invisible_format_characters_are_refused_in_recipients_and_the_allow_list(
    only_billing: OutboxRepository,
) -> None:
    repo = only_billing
    for address in ("ann\u200b@example.com", "ann\u200d@example.com", "ann@exa\u00admple.com"):
        with pytest.raises(InvalidInput, match="to_address"):
            repo.enqueue(f"to-{visible(address)}", address, "s", text_body="t")
    with pytest.raises(InvalidInput, match="ASCII"):
        repo.sender_add("billing@ex\u00e4mple.com", "", "ops", "look-alike")
    with pytest.raises(InvalidInput, match="sender"):
        repo.sender_add("billing\u200b@example.com", "", "ops", "look-alike")
    # Text keeps the joiners emoji and some scripts need; an invisible space is refused there too.
    assert repo.enqueue(
        "family", "ann@example.com", "\U0001f468\u200d\U0001f469\u200d\U0001f467", text_body="t"
    ).affected
    with pytest.raises(InvalidInput, match="subject"):
        repo.enqueue("hidden", "ann@example.com", "pay\u200bpal", text_body="t")
    # What is already stored shows the character as an escape, in the console and the CLI alike.
    assert visible("billing\u200b@example.com") == "billing\\u200b@example.com"
