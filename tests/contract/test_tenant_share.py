"""The fair-share claim (issue 37): sends are shared among the tenants with due rows in proportion to
their weights, whatever their priorities and backlogs; priority orders rows within a tenant; a tenant
that was idle starts again from the schedule's clock (it banks no share); a paused tenant and one at
its send rate or daily quota wait with no attempt used, while the others take the rest."""

from __future__ import annotations

from collections import Counter

from email_outbox.db.repository import OutboxRepository
from tests.support.helpers import scalar, token


def add_tenant(repo: OutboxRepository, name: str, **columns: object) -> int:
    cursor = repo.connection.cursor()
    names = ["name", *columns]
    cursor.execute(
        f"INSERT INTO email_tenants ({', '.join(names)}, created_at, updated_at)"
        f" VALUES ({', '.join(['%s'] * len(names))}, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
        (name, *columns.values()),
    )
    tenant_id = int(cursor.lastrowid)  # type: ignore[arg-type]
    cursor.close()
    repo.connection.commit()
    return tenant_id


def enqueue_for(
    repo: OutboxRepository, tenant_id: int, count: int, prefix: str, priority: int = 5
) -> list[int]:
    ids = []
    for i in range(count):
        message = f'{{"to": ["u{i}@example.com"], "subject": "s", "text": "t", "priority": {priority}}}'
        ids.append(repo.enqueue_message(f"{prefix}-{i}", message).attempt_id)
    cursor = repo.connection.cursor()
    cursor.execute(
        f"UPDATE email_delivery_attempts SET tenant_id = %s WHERE id IN ({', '.join(['%s'] * len(ids))})",
        (tenant_id, *ids),
    )
    cursor.close()
    repo.connection.commit()
    return ids


def claim_tenants(repo: OutboxRepository, limit: int) -> list[str | None]:
    return [row.tenant for row in repo.reserve_batch(token(), "w", 60, limit, 1_000_000)]


def test_the_claim_row_names_the_tenant(repo: OutboxRepository) -> None:
    enqueue_for(repo, 1, 1, "plain")
    assert claim_tenants(repo, 5) == ["default"]


def test_equal_weights_share_equally_whatever_the_priorities_and_backlogs(repo: OutboxRepository) -> None:
    a = add_tenant(repo, "newsletter")
    b = add_tenant(repo, "codes")
    enqueue_for(repo, a, 40, "a", priority=9)
    enqueue_for(repo, b, 10, "b", priority=5)
    shares = Counter(claim_tenants(repo, 10))
    assert shares == {"newsletter": 5, "codes": 5}, "priority 9 does not take a lower tenant's share"
    # b's ten are soon gone; its share left is a's
    shares = Counter(claim_tenants(repo, 10)) + Counter(claim_tenants(repo, 10))
    assert shares == {"newsletter": 15, "codes": 5}


def test_weights_three_to_one(repo: OutboxRepository) -> None:
    heavy = add_tenant(repo, "heavy", weight=3)
    light = add_tenant(repo, "light", weight=1)
    enqueue_for(repo, heavy, 60, "h")
    enqueue_for(repo, light, 60, "l")
    shares: Counter[str | None] = Counter()
    for _ in range(10):
        shares.update(claim_tenants(repo, 4))
    assert shares == {"heavy": 30, "light": 10}


def test_priority_orders_rows_within_a_tenant(repo: OutboxRepository) -> None:
    a = add_tenant(repo, "a")
    low = enqueue_for(repo, a, 2, "low", priority=1)
    high = enqueue_for(repo, a, 2, "high", priority=8)
    rows = repo.reserve_batch(token(), "w", 60, 4, 1_000_000)
    assert [r.id for r in rows] == high + low


def test_an_idle_tenant_banks_no_share(repo: OutboxRepository) -> None:
    """A tenant that had nothing to send while another sent 40 starts from the clock, not from 0: it
    gets its share from then on, not the next 40 sends."""
    a = add_tenant(repo, "busy")
    b = add_tenant(repo, "back")
    enqueue_for(repo, a, 80, "a")
    for _ in range(4):
        assert set(claim_tenants(repo, 10)) == {"busy"}
    enqueue_for(repo, b, 20, "b")
    assert Counter(claim_tenants(repo, 10)) == {"busy": 5, "back": 5}


def test_a_newcomer_leads_the_batch(repo: OutboxRepository) -> None:
    """The tenant whose turn comes first has its rows first in the claim, so a reserved batch of another
    tenant's rows never holds its one email back."""
    a = add_tenant(repo, "bulk")
    b = add_tenant(repo, "otp")
    enqueue_for(repo, a, 50, "a", priority=9)
    claim_tenants(repo, 10)
    enqueue_for(repo, b, 1, "b", priority=5)
    assert claim_tenants(repo, 10) == ["otp"] + ["bulk"] * 9


def test_paused_rate_and_quota_limits_wait_with_no_attempt_used(repo: OutboxRepository) -> None:
    paused = add_tenant(repo, "paused", paused_reason="operator")
    slow = add_tenant(repo, "slow", send_rate=2.0)
    capped = add_tenant(repo, "capped", daily_quota=3)
    free = add_tenant(repo, "free")
    for tenant, prefix in ((paused, "p"), (slow, "s"), (capped, "c"), (free, "f")):
        enqueue_for(repo, tenant, 20, prefix)
    shares = Counter(claim_tenants(repo, 20))
    # slow: its rate's one-second burst (2); capped: its day's 3; free takes the rest
    assert shares == {"slow": 2, "capped": 3, "free": 15}
    assert Counter(claim_tenants(repo, 20)) == {"free": 5}
    waiting = scalar(
        repo,
        "SELECT COUNT(*) FROM email_delivery_attempts WHERE tenant_id IN (%s, %s, %s)"
        " AND status = 'Pending' AND attempt_count = 0",
        (paused, slow, capped),
    )
    assert waiting == 20 + 18 + 17


def test_the_reputation_guard_holds_rows_below_its_priority(repo: OutboxRepository) -> None:
    guarded = add_tenant(repo, "guarded", guard_below_priority=7)
    low = enqueue_for(repo, guarded, 3, "low", priority=5)
    high = enqueue_for(repo, guarded, 2, "high", priority=7)
    rows = repo.reserve_batch(token(), "w", 60, 10, 1_000_000)
    assert [r.id for r in rows] == high
    assert scalar(repo, "SELECT COUNT(*) FROM email_delivery_attempts WHERE status = 'Pending'") == len(low)


def test_the_per_row_claim_holds_a_paused_or_guarded_tenants_rows_too(repo: OutboxRepository) -> None:
    paused = add_tenant(repo, "paused", paused_reason="ses-sending-paused")
    guarded = add_tenant(repo, "guarded", guard_below_priority=7)
    free = add_tenant(repo, "free")
    [held] = enqueue_for(repo, paused, 1, "p")
    [low] = enqueue_for(repo, guarded, 1, "low", priority=5)
    [high] = enqueue_for(repo, guarded, 1, "high", priority=7)
    [other] = enqueue_for(repo, free, 1, "f")
    assert {c.id for c in repo.claimable_candidates(10)} == {high, other}
    assert repo.try_claim(held, token(), "w", 60) == 0, "a paused tenant's row is never claimed"
    assert repo.try_claim(low, token(), "w", 60) == 0, "the guard holds the rows below its priority"
    assert repo.try_claim(high, token(), "w", 60) == 1
    assert repo.try_claim(other, token(), "w", 60) == 1
    waiting = scalar(
        repo,
        "SELECT COUNT(*) FROM email_delivery_attempts WHERE id IN (%s, %s)"
        " AND status = 'Pending' AND attempt_count = 0",
        (held, low),
    )
    assert waiting == 2


def test_the_per_row_claim_keeps_a_tenants_daily_quota(repo: OutboxRepository) -> None:
    capped = add_tenant(repo, "capped", daily_quota=2)
    free = add_tenant(repo, "free")
    first, second, third = enqueue_for(repo, capped, 3, "c")
    [other] = enqueue_for(repo, free, 1, "f")
    assert {c.id for c in repo.claimable_candidates(10)} == {first, second, third, other}
    assert repo.try_claim(first, token(), "w", 60) == 1
    assert repo.try_claim(second, token(), "w", 60) == 1
    assert {c.id for c in repo.claimable_candidates(10)} == {other}, "a tenant at its quota is not listed"
    assert repo.try_claim(third, token(), "w", 60) == 0, "a tenant at its quota is not claimed"
    assert repo.try_claim(other, token(), "w", 60) == 1
    assert scalar(repo, "SELECT day_count FROM email_tenants WHERE id = %s", (capped,)) == 2
    waiting = scalar(
        repo,
        "SELECT COUNT(*) FROM email_delivery_attempts WHERE id = %s AND status = 'Pending' AND attempt_count = 0",
        (third,),
    )
    assert waiting == 1


def test_the_per_row_claim_keeps_a_tenants_send_rate(repo: OutboxRepository) -> None:
    slow = add_tenant(repo, "slow", send_rate=1.0)
    first, second = enqueue_for(repo, slow, 2, "s")
    assert repo.try_claim(first, token(), "w", 60) == 1
    assert repo.try_claim(second, token(), "w", 60) == 0, "one send a second: the second waits"
    assert {c.id for c in repo.claimable_candidates(10)} == set()
    # The schedule stands where its last send left it; one interval (a second) on, on the server's
    # clock, the next send is due: awaited, then the row is claimed.
    next_send = "SELECT UTC_TIMESTAMP(6) >= rate_next_at + INTERVAL 1 SECOND FROM email_tenants WHERE id = %s"
    while not scalar(repo, next_send, (slow,)):
        repo.connection.commit()
    assert repo.try_claim(second, token(), "w", 60) == 1


def test_claims_of_one_row_keep_the_weights(repo: OutboxRepository) -> None:
    """A worker with one free slot claims one row at a time: a tenant left out of a claim keeps its
    place, so one-row claims share 3:1 as batches do."""
    heavy = add_tenant(repo, "heavy", weight=3)
    light = add_tenant(repo, "light", weight=1)
    enqueue_for(repo, heavy, 30, "h")
    enqueue_for(repo, light, 30, "l")
    shares: Counter[str | None] = Counter()
    for _ in range(20):
        shares.update(claim_tenants(repo, 1))
    assert shares == {"heavy": 15, "light": 5}


def test_a_tenant_the_guard_holds_entirely_does_not_hold_the_clock_back(repo: OutboxRepository) -> None:
    """A tenant whose every due row is below its reputation guard's priority is given nothing claim
    after claim; the clock still moves with the tenants served, so an idle tenant coming back banks no
    share."""
    a = add_tenant(repo, "busy")
    held = add_tenant(repo, "held", guard_below_priority=7)
    b = add_tenant(repo, "back")
    enqueue_for(repo, held, 3, "h", priority=5)
    enqueue_for(repo, a, 80, "a")
    for _ in range(4):
        assert set(claim_tenants(repo, 10)) == {"busy"}
    enqueue_for(repo, b, 20, "b")
    assert Counter(claim_tenants(repo, 10)) == {"busy": 5, "back": 5}


def test_a_claim_lifts_an_idle_tenant_past_its_walk_and_it_is_served_within_a_round(
    repo: OutboxRepository,
) -> None:
    """A tenant with nothing due whose pass is below the busy tenants' is read by the claim's walk; a
    claim whose walk stops short of the last tenant lifts its pass to just below the tenants it served, past those still waiting, so the next
    claims' walks, which stop once they cover their slots, reach it again only after those had their
    turn, not on every claim. Once it has rows it is served within one round of the share, once."""
    idle = add_tenant(repo, "idle")
    busy = {name: add_tenant(repo, name) for name in "abcdefghij"}
    for name, tenant_id in busy.items():
        enqueue_for(repo, tenant_id, 10, name)

    def pass_of(tenant_id: int) -> float:
        return float(scalar(repo, "SELECT pass FROM email_tenants WHERE id = %s", (tenant_id,)))

    assert pass_of(idle) == 0
    assert Counter(claim_tenants(repo, 2)) == {"a": 1, "b": 1}
    lifted = pass_of(idle)
    waiting = max(pass_of(busy[name]) for name in "cdefghij")
    served = min(pass_of(busy[name]) for name in "ab")
    assert waiting < lifted < served, "after the tenants still waiting, just below those served"
    assert Counter(claim_tenants(repo, 8)) == dict.fromkeys("cdefghij", 1)
    assert pass_of(idle) == lifted

    enqueue_for(repo, idle, 3, "idle")
    shares: Counter[str | None] = Counter()
    for _ in range(11):
        shares.update(claim_tenants(repo, 1))
    assert shares == {**dict.fromkeys("abcdefghij", 1), "idle": 1}
