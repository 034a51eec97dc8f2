"""Each tenant's reputation from SES's events (issue 37): the events consumer's procedure counts Send,
permanent Bounce and Complaint events per tenant and hour; the guard holds a tenant's sends below a
priority once it has enough sends and its complaint or bounce rate reaches the threshold (logged
once), no other tenant waits, and `tenants resume` lifts it; email_tenant_stats shows it all."""

from __future__ import annotations

import json
from datetime import timedelta

from email_outbox.db.repository import OutboxRepository
from tests.conftest import db_now
from tests.support.helpers import scalar, token


def enqueue(repo: OutboxRepository, tenant: str, notification_id: str, priority: int = 5) -> int:
    message = {"to": ["a@example.com"], "subject": "s", "text": "t", "tenant": tenant, "priority": priority}
    return repo.enqueue_message(notification_id, json.dumps(message)).attempt_id


def sent(repo: OutboxRepository, attempt_id: int, message_id: str) -> None:
    t = token()
    assert repo.try_claim(attempt_id, t, "w", 60) == 1
    assert repo.finalize_sent(attempt_id, t, message_id) == 1


def hours(repo: OutboxRepository, tenant: str, sends: int, complaints: int = 0, bounces: int = 0) -> None:
    """SES's events of a day as the events consumer counts them (a fixture: 200 events would be 200 calls)."""
    cursor = repo.connection.cursor()
    cursor.execute(
        "INSERT INTO email_tenant_event_hours (tenant_id, hour_at, sends, permanent_bounces, complaints)"
        " SELECT id, DATE_FORMAT(UTC_TIMESTAMP() - INTERVAL 2 HOUR, '%Y-%m-%d %H:00:00'), %s, %s, %s"
        " FROM email_tenants WHERE name = %s",
        (sends, bounces, complaints, tenant),
    )
    cursor.close()
    repo.connection.commit()


def guard(repo: OutboxRepository) -> list[str]:
    return [g.tenant for g in repo.tenant_guard("w", 200, 0.001, 0.05, 7)]


def test_recorded_events_are_counted_per_tenant(repo: OutboxRepository) -> None:
    repo.tenant_add("news", {"accounts": ["*"]}, "ops", "why")
    attempt_id = enqueue(repo, "news", "n1")
    sent(repo, attempt_id, "ses-1")
    now = db_now(repo)
    events = (("Send", None), ("Complaint", "abuse"), ("Bounce", "Transient"), ("Bounce", "Permanent"))
    for minutes, (event_type, kind) in enumerate(events, start=1):
        repo.record_provider_event(
            event_type=event_type,
            ses_message_id="ses-1",
            outbox_id=str(attempt_id),
            recipient="a@example.com",
            event_at=now - timedelta(minutes=minutes),
            kind=kind,
            subkind=None,
            detail=None,
            recorded_by="events",
        )
    (news,) = [t for t in repo.tenant_stats() if t.tenant == "news"]
    assert (news.sends_24h, news.complaint_rate, news.bounce_rate) == (1, 1.0, 1.0)


def test_the_guard_holds_a_tenant_below_its_priority_until_resumed(repo: OutboxRepository) -> None:
    for name in ("spammy", "clean", "young"):
        repo.tenant_add(name, {"accounts": ["*"]}, "ops", "why")
    hours(repo, "spammy", sends=1000, complaints=1)  # 0.1%: SES's review threshold
    hours(repo, "clean", sends=1000, bounces=49)  # 4.9%: under 5%
    hours(repo, "young", sends=199, complaints=10)  # too few sends to judge
    assert guard(repo) == ["spammy"]
    assert guard(repo) == [], "said once"
    low = enqueue(repo, "spammy", "low", priority=5)
    high = enqueue(repo, "spammy", "high", priority=7)
    other = enqueue(repo, "clean", "other", priority=1)
    claimed = {r.id for r in repo.reserve_batch(token(), "w", 60, 10, 1_000_000)}
    assert claimed == {high, other}, "the guarded tenant's low priority waits, no other tenant does"
    stats = {t.tenant: t for t in repo.tenant_stats()}
    assert stats["spammy"].held == "reputation-guard-below-7"
    assert stats["spammy"].guard_reason == "complaint rate 0.100%, over 1000 sends in 24 h"
    assert stats["spammy"].due_rows == 1 and stats["clean"].held is None
    assert scalar(repo, "SELECT COUNT(*) FROM email_tenants_log WHERE action = 'guard'") == 1

    resumed = repo.tenant_resume("spammy", "ops", "list cleaned")
    assert (resumed.affected, resumed.guard_below_priority) == (1, 7)
    assert [r.id for r in repo.reserve_batch(token(), "w", 60, 10, 1_000_000)] == [low]
    assert guard(repo) == [], "a resume counts only the events after it"
