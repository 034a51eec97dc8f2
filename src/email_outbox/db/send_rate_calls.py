"""The calls about the SES account's shared send rate and daily quota (email_send_rate_*): a part of
OutboxRepository, kept apart like the provider-event calls."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from email_outbox.db.calls import Calls

PAUSED_DAILY_QUOTA = "daily quota"
# The row email_send_rate starts with (migration 0013): the conservative default, 1 send/s and 200 a
# day (an SES sandbox account), until the first worker reports what GetAccount says.
INITIAL_SEND_RATE_ROW = """
INSERT IGNORE INTO email_send_rate
  (id, account_rate, rate_source, pace_rate, daily_quota, daily_source, counted_since, next_slice_at)
VALUES (1, 1, 'default', 0.95, 200, 'default', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))
"""


@dataclass(frozen=True)
class RateSlice:
    """One answer of email_send_rate_take: a slice of the account's schedule, and the shared state."""

    granted: int
    start_in_seconds: float
    interval_seconds: float
    wait_seconds: float
    rate: float
    account_rate: float
    rate_source: str
    daily_quota: int | None
    daily_used: int
    paused: str | None
    refresh_due: bool


@dataclass(frozen=True)
class SendRateStatus:
    """email_send_rate_status: the rate in force and the daily quota, as all replicas share them."""

    rate: float
    account_rate: float
    rate_source: str
    pace_rate: float
    recovering: bool
    daily_quota: int | None
    daily_source: str | None
    daily_used: int
    paused: str | None
    reported_at: datetime | None
    reported_by: str | None

    def describe(self) -> str:
        """One line for `status` and the console: the rate in force, its source, the day's use."""
        rate = (
            f"{self.rate:g}/s" if not self.recovering else f"{self.rate:.3g}/s (recovering from throttling)"
        )
        daily = (
            f"{self.daily_used} of {self.daily_quota} ({self.daily_source})"
            if self.daily_quota is not None
            else f"{self.daily_used} (no daily quota)"
        )
        line = (
            f"send rate {rate}, account {self.account_rate:g}/s ({self.rate_source});"
            f" handed out in 24 h (SES count at the last report, plus sends granted since) {daily}"
        )
        return f"{line}; paused: {self.paused}" if self.paused else line


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


class SendRateCalls(Calls):
    """Mixed into OutboxRepository, which supplies `_call`."""

    def send_rate_take(self, worker: str, wanted: int, unused: int, refresh_seconds: int) -> RateSlice:
        r = self._call(
            "email_send_rate_take",
            worker=worker,
            wanted=wanted,
            unused=unused,
            refresh_seconds=refresh_seconds,
        )[0]
        return RateSlice(
            granted=int(r["granted"]),
            start_in_seconds=float(r["start_in_seconds"]),
            interval_seconds=float(r["interval_seconds"]),
            wait_seconds=float(r["wait_seconds"]),
            rate=float(r["rate"]),
            account_rate=float(r["account_rate"]),
            rate_source=str(r["rate_source"]),
            daily_quota=_optional_int(r["daily_quota"]),
            daily_used=int(r["daily_used"]),
            paused=r["paused"],
            refresh_due=bool(r["refresh_due"]),
        )

    def send_rate_report(
        self,
        reported_by: str,
        account_rate: float,
        rate_source: str,
        pace_rate: float,
        daily_quota: int | None,
        daily_source: str | None,
        sent_last_24h: int | None,
    ) -> int:
        return int(
            self._call(
                "email_send_rate_report",
                reported_by=reported_by,
                account_rate=account_rate,
                rate_source=rate_source,
                pace_rate=pace_rate,
                daily_quota=daily_quota,
                daily_source=daily_source,
                sent_last_24h=sent_last_24h,
            )[0]["affected"]
        )

    def send_rate_throttled(self, worker: str, cut_share: float, recover_seconds: float) -> tuple[int, float]:
        r = self._call(
            "email_send_rate_throttled", worker=worker, cut_share=cut_share, recover_seconds=recover_seconds
        )[0]
        return int(r["affected"]), float(r["rate"])

    def send_rate_status(self) -> SendRateStatus | None:
        rows = self._call("email_send_rate_status")
        if not rows or rows[0]["rate"] is None:
            return None
        r = rows[0]
        return SendRateStatus(
            rate=float(r["rate"]),
            account_rate=float(r["account_rate"]),
            rate_source=str(r["rate_source"]),
            pace_rate=float(r["pace_rate"]),
            recovering=bool(r["recovering"]),
            daily_quota=_optional_int(r["daily_quota"]),
            daily_source=r["daily_source"],
            daily_used=int(r["daily_used"]),
            paused=r["paused"],
            reported_at=r["reported_at"],
            reported_by=r["reported_by"],
        )
