"""The SES account's shared send rate (email_send_rate_*): slices of one schedule that never overlap
whoever takes them, a daily quota that stops the handing out, a throttling cut that grows back, and
the report of what GetAccount said."""

from __future__ import annotations

from datetime import timedelta

import pytest

from email_outbox.db.repository import OutboxRepository
from email_outbox.errors import OutboxError
from tests.conftest import db_now, set_clock


def report(
    repo: OutboxRepository, rate: float = 40.0, daily: int | None = 1000, sent: int | None = 0
) -> None:
    assert repo.send_rate_report("w-report", rate, "ses", rate * 0.95, daily, "ses", sent) == 1


def test_slices_follow_one_schedule_at_the_paced_rate_whoever_takes_them(
    repo: OutboxRepository, open_repo: object
) -> None:
    other: OutboxRepository = open_repo()  # type: ignore[operator]
    report(repo, rate=40.0)
    now = db_now(repo) + timedelta(seconds=10)  # the schedule idle since the row was made
    set_clock(repo, now)
    set_clock(other, now)
    repo.send_rate_take("w-a", 100, 0, 60)  # the quarter of a second an idle schedule keeps
    a = repo.send_rate_take("w-a", 100, 0, 60)
    b = other.send_rate_take("w-b", 100, 0, 60)
    assert a.rate == pytest.approx(38.0) and a.rate_source == "ses"
    assert a.granted == 9, "a slice is a quarter of a second of the paced rate"
    assert a.start_in_seconds == pytest.approx(9 / 38.0 - 0.25, abs=1e-5)
    assert a.interval_seconds == pytest.approx(1 / 38.0)
    assert b.start_in_seconds == pytest.approx(18 / 38.0 - 0.25, abs=1e-5), (
        "the next slice starts where the first ends"
    )
    # The schedule is handed out at most one second ahead: then a replica is told to wait.
    answers = [repo.send_rate_take("w-a", 100, 0, 60) for _ in range(4)]
    assert [x.granted for x in answers] == [9, 9, 9, 0]
    assert (
        answers[3].wait_seconds == pytest.approx(54 / 38.0 - 0.25 - 1, abs=1e-5)
        and answers[3].daily_used == 54
    )
    set_clock(repo, now + timedelta(seconds=5))
    late = repo.send_rate_take("w-a", 2, 0, 60)
    assert late.granted == 2 and late.start_in_seconds == pytest.approx(-0.25), (
        "an idle schedule restarts a quarter of a second back, no more burst kept"
    )


def test_the_daily_quota_stops_the_slices_until_a_report_shows_room(repo: OutboxRepository) -> None:
    report(repo, rate=100.0, daily=30, sent=20)
    now = db_now(repo)
    set_clock(repo, now)
    first = repo.send_rate_take("w-a", 50, 0, 60)
    assert first.granted == 10 and first.daily_used == 30, "never more than the quota's room"
    paused = repo.send_rate_take("w-a", 50, 0, 60)
    assert (paused.granted, paused.paused) == (0, "daily quota")
    assert paused.wait_seconds == pytest.approx(60, abs=1), "until the next GetAccount read is due"
    status = repo.send_rate_status()
    assert status is not None and status.paused == "daily quota" and status.daily_used == 30
    assert "paused: daily quota" in status.describe()
    # Unused sends reported back leave the day's count.
    assert repo.send_rate_take("w-a", 50, 4, 60).granted == 4
    set_clock(repo, now + timedelta(seconds=61))
    due = repo.send_rate_take("w-a", 50, 0, 60)
    assert due.refresh_due and due.granted == 0
    assert not repo.send_rate_take("w-b", 50, 0, 60).refresh_due, "one replica reads GetAccount per period"
    report(repo, rate=100.0, daily=30, sent=5)
    after = repo.send_rate_take("w-a", 50, 0, 60)
    assert (after.granted, after.daily_used) == (23, 28), "SES's count replaces ours"


def test_a_throttle_cuts_the_shared_rate_once_a_second_and_it_grows_back(repo: OutboxRepository) -> None:
    report(repo, rate=40.0)
    now = db_now(repo)
    set_clock(repo, now)
    assert repo.send_rate_throttled("w-a", 0.8, 20) == (1, pytest.approx(30.4))
    assert repo.send_rate_throttled("w-b", 0.8, 20)[0] == 0, "one cut per second, whoever reports it"
    status = repo.send_rate_status()
    assert status is not None and status.recovering and status.rate == pytest.approx(30.4)
    set_clock(repo, now + timedelta(seconds=10))
    assert repo.send_rate_take("w-a", 1, 0, 60).rate == pytest.approx(34.2)
    set_clock(repo, now + timedelta(seconds=30))
    status = repo.send_rate_status()
    assert status is not None and not status.recovering and status.rate == pytest.approx(38.0)


def test_without_a_known_sent_count_the_day_counts_what_was_handed_out(repo: OutboxRepository) -> None:
    assert repo.send_rate_report("w-a", 1.0, "default", 0.95, 200, "default", None) == 1
    for _ in range(3):
        repo.send_rate_take("w-a", 1, 0, 60)
        set_clock(repo, db_now(repo) + timedelta(seconds=2))
    assert repo.send_rate_report("w-a", 1.0, "default", 0.95, 200, "default", None) == 1
    status = repo.send_rate_status()
    assert status is not None and status.daily_used == 3 and status.rate_source == "default"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("w", 0.0, "ses", 0.0, None, None, None), "account_rate"),
        (("w", 10.0, "ses", 11.0, None, None, None), "pace_rate"),
        (("w", 10.0, "guess", 9.0, None, None, None), "rate_source"),
        (("w", 10.0, "ses", 9.0, -1, "ses", None), "daily_quota"),
        (("w", 10.0, "ses", 9.0, None, None, -1), "sent_last_24h"),
        (("", 10.0, "ses", 9.0, None, None, None), "reported_by"),
    ],
)
def test_a_bad_report_is_refused_naming_its_field(
    repo: OutboxRepository, args: tuple[object, ...], field: str
) -> None:
    with pytest.raises(OutboxError, match=field):
        repo.send_rate_report(*args)  # type: ignore[arg-type]
    status = repo.send_rate_status()
    assert status is not None and status.rate_source == "default", "nothing written"


def test_a_bad_take_is_refused_naming_its_field(repo: OutboxRepository) -> None:
    for args, field in (
        (("w", 0, 0, 60), "wanted"),
        (("w", 1, -1, 60), "unused"),
        (("w", 1, 0, 0), "refresh_seconds"),
    ):
        with pytest.raises(OutboxError, match=field):
            repo.send_rate_take(*args)  # type: ignore[arg-type]
    with pytest.raises(OutboxError, match="cut_share"):
        repo.send_rate_throttled("w", 0.0, 20)
