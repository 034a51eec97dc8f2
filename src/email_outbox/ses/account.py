"""The SES account's sending quota, read with SESv2 GetAccount through the same client conventions as
sending (email_outbox.ses.sender.make_client: endpoint, region and credentials from the environment,
botocore's retries off)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from email_outbox.ses.sender import make_client
from email_outbox.ses.settings import SesSettings


class AccountUnreadable(Exception):
    """GetAccount was refused (no ses:GetAccount permission) or did not answer."""


@dataclass(frozen=True)
class AccountQuota:
    """SendQuota of GetAccount. max_24_hour_send None: no daily limit (SES says -1)."""

    max_send_rate: float
    max_24_hour_send: int | None
    sent_last_24_hours: int


class AccountReader(Protocol):
    def read(self) -> AccountQuota: ...


class SesAccount:
    def __init__(self, client: Any) -> None:
        self.client = client

    @classmethod
    def for_config(cls, config: SesSettings) -> SesAccount:
        return cls(make_client(config))

    def read(self) -> AccountQuota:
        try:
            quota = self.client.get_account()["SendQuota"]
            daily = float(quota["Max24HourSend"])
            return AccountQuota(
                max_send_rate=float(quota["MaxSendRate"]),
                max_24_hour_send=None if daily < 0 else int(daily),
                sent_last_24_hours=int(float(quota.get("SentLast24Hours") or 0)),
            )
        except Exception as exc:  # refused, unreachable, or an answer without a SendQuota
            raise AccountUnreadable(f"{type(exc).__name__}: {exc}"[:500]) from exc
