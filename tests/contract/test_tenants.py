"""Tenants through the procedures (issue 37): operators add, change, pause, resume and remove them,
logged; a message names its tenant (the account's default, else the shared default, when it names
none); a tenant the account may not use, a priority above its tenant's highest and an enqueue past its
cap on waiting rows are refused with their numbers, nothing written."""

from __future__ import annotations

import json

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import InvalidArgument, InvalidMember, QuotaExceeded, TenantNotAllowed
from tests.support.helpers import scalar, token


def message(**members: object) -> str:
    return json.dumps({"to": ["user@example.com"], "subject": "s", "text": "t", **members})


def tenant_of(repo: OutboxRepository, attempt_id: int) -> str | None:
    return repo.get_row(attempt_id).tenant


def nothing_written(repo: OutboxRepository) -> bool:
    return scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 0


def test_operators_manage_tenants_and_every_change_is_logged(repo: OutboxRepository) -> None:
    settings = {"weight": 3, "max_priority": 7, "send_rate": 2.5, "daily_quota": 1000, "accounts": ["svc_a"]}
    assert repo.tenant_add("news-letter_1", settings, "ops", "the newsletter") == 1
    assert repo.tenant_add("news-letter_1", {}, "ops", "again") == 0, "an existing name is an answer"
    assert repo.tenant_set("news-letter_1", {"send_rate": None, "max_waiting_rows": 50}, "ops", "raise") == 1
    assert repo.tenant_set("nobody", {"weight": 2}, "ops", "x") == 0
    (tenant,) = [t for t in repo.tenants() if t.name == "news-letter_1"]
    assert (
        tenant.weight,
        tenant.max_priority,
        tenant.send_rate,
        tenant.daily_quota,
        tenant.max_waiting_rows,
    ) == (
        3,
        7,
        None,
        1000,
        50,
    )
    assert tenant.accounts == ("svc_a",)
    assert repo.tenant_pause("news-letter_1", "ops", "complaints") == 1
    assert repo.tenant_pause("news-letter_1", "ops", "again") == 0
    resumed = repo.tenant_resume("news-letter_1", "ops", "fixed")
    assert (resumed.affected, resumed.paused_reason) == (1, "operator")
    assert repo.tenant_remove("news-letter_1", "ops", "gone") == 1
    log = [
        tuple(r) for r in _rows(repo, "SELECT action, name, actor, reason FROM email_tenants_log ORDER BY id")
    ]
    assert log == [
        ("add", "news-letter_1", "ops", "the newsletter"),
        ("set", "news-letter_1", "ops", "raise"),
        ("pause", "news-letter_1", "ops", "complaints"),
        ("resume", "news-letter_1", "ops", "fixed"),
        ("remove", "news-letter_1", "ops", "gone"),
    ]


def _rows(repo: OutboxRepository, sql: str) -> list[tuple[object, ...]]:
    cursor = repo.connection.cursor()
    cursor.execute(sql)
    rows = list(cursor.fetchall())
    cursor.close()
    return rows  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("name", "settings", "error", "rule"),
    [
        ("has space", {}, InvalidArgument, "name must be 1 to 64 of A-Za-z0-9_-"),
        ("x" * 65, {}, InvalidArgument, "name must be 1 to 64 of A-Za-z0-9_-"),
        ("ünï", {}, InvalidArgument, "name must be 1 to 64 of A-Za-z0-9_-"),
        ("ok", {"weight": 0}, InvalidArgument, "weight must be an integer from 1 to 1000"),
        ("ok", {"weight": "3"}, InvalidArgument, "weight must be an integer from 1 to 1000"),
        ("ok", {"max_priority": 10}, InvalidArgument, "max_priority must be an integer from 0 to 9"),
        ("ok", {"send_rate": 0}, InvalidArgument, "send_rate must be null or sends per second"),
        ("ok", {"daily_quota": 0}, InvalidArgument, "daily_quota must be null or an integer of 1 or more"),
        ("ok", {"ses_tenant_name": "a b"}, InvalidArgument, "ses_tenant_name must be 1 to 64 of A-Za-z0-9_-"),
        ("ok", {"accounts": ["a@host"]}, InvalidArgument, "accounts must list database user names"),
        ("ok", {"accounts": "svc"}, InvalidMember, "accounts must be a list"),
        ("ok", {"colour": "red"}, InvalidMember, "unknown member"),
    ],
)
def test_bad_tenant_settings_are_refused_and_nothing_is_written(
    repo: OutboxRepository, name: str, settings: dict[str, object], error: type[Exception], rule: str
) -> None:
    with pytest.raises(error, match=rule):
        repo.tenant_add(name, settings, "ops", "why")
    assert [t.name for t in repo.tenants()] == ["default"]
    assert scalar(repo, "SELECT COUNT(*) FROM email_tenants_log") == 0


def test_the_shared_default_cannot_be_removed_nor_a_tenant_with_waiting_rows(repo: OutboxRepository) -> None:
    with pytest.raises(InvalidArgument, match="shared default tenant cannot be removed"):
        repo.tenant_remove("default", "ops", "why")
    repo.tenant_add("busy", {"accounts": ["*"]}, "ops", "why")
    repo.enqueue_message("one", message(tenant="busy"))
    with pytest.raises(InvalidArgument, match="still has waiting rows"):
        repo.tenant_remove("busy", "ops", "why")


def test_a_message_names_its_tenant_or_gets_the_account_default_else_the_shared_one(
    repo: OutboxRepository, accounts: dict[str, DatabaseDsn]
) -> None:
    service = accounts["enqueuer"].user
    repo.tenant_add("billing", {"accounts": [service]}, "ops", "why")
    repo.tenant_add("alerts", {"accounts": [service], "default_for": [service]}, "ops", "why")
    app = OutboxRepository.open(accounts["enqueuer"])
    try:
        named = app.enqueue_message("named", message(tenant="billing")).attempt_id
        defaulted = app.enqueue_message("defaulted", message()).attempt_id
        plain = app.enqueue("plain", "user@example.com", "s", text_body="t").attempt_id
        shared = app.enqueue_message("shared", message(tenant="default")).attempt_id
        with pytest.raises(TenantNotAllowed, match="tenant nobody is not one this account may use"):
            app.enqueue_message("unknown", message(tenant="nobody"))
    finally:
        app.close()
    ops_row = repo.enqueue_message("ops-own", message()).attempt_id
    assert [tenant_of(repo, i) for i in (named, defaulted, plain, shared, ops_row)] == [
        "billing",
        "alerts",
        "alerts",
        "default",
        "default",
    ]
    with pytest.raises(TenantNotAllowed, match="tenant billing is not one this account may use"):
        repo.enqueue_message("not-mine", message(tenant="billing"))
    assert (
        scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts WHERE notification_id = 'not-mine'") == 0
    )
    claimed = repo.reserve_batch(token(), "w", 60, 10, 1_000_000)
    assert sorted(r.tenant or "" for r in claimed) == ["alerts", "alerts", "billing", "default", "default"]


def test_a_priority_above_the_tenants_highest_is_refused_naming_it(repo: OutboxRepository) -> None:
    repo.tenant_add("bulk", {"accounts": ["*"], "max_priority": 4}, "ops", "why")
    with pytest.raises(TenantNotAllowed, match="priority 9 is above tenant bulk's highest, 4"):
        repo.enqueue_message("too-high", message(tenant="bulk", priority=9))
    assert nothing_written(repo)
    attempt_id = repo.enqueue_message("no-priority", message(tenant="bulk")).attempt_id
    assert repo.get_row(attempt_id).priority == 4, "no priority asked: 5, or the tenant's highest if lower"


def test_an_enqueue_past_the_waiting_cap_is_refused_with_quota_exceeded(repo: OutboxRepository) -> None:
    repo.tenant_add("capped", {"accounts": ["*"], "max_waiting_rows": 2}, "ops", "why")
    for i in range(2):
        repo.enqueue_message(f"ok-{i}", message(tenant="capped"))
    with pytest.raises(
        QuotaExceeded, match=r"tenant capped has 2 waiting rows, its cap \(max_waiting_rows 2\)"
    ):
        repo.enqueue_message("over", message(tenant="capped"))
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts") == 2
    repo.reserve_batch(token(), "w", 60, 1, 1_000_000)
    repo.enqueue_message("room-again", message(tenant="capped"))


@pytest.mark.parametrize(
    ("value", "error", "rule"),
    [
        ("bad name", InvalidArgument, "tenant must be 1 to 64 of A-Za-z0-9_-"),
        (7, InvalidMember, "tenant must be a string"),
    ],
)
def test_a_bad_tenant_member_is_refused(
    repo: OutboxRepository, value: object, error: type[Exception], rule: str
) -> None:
    with pytest.raises(error, match=rule):
        repo.enqueue_message("bad", message(tenant=value))
    assert nothing_written(repo)
