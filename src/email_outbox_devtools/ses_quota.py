"""The SES account quota of the local SES endpoint: what GetAccount answers, and how SendEmail is held
to it the way SES holds an account to its quota: a send beyond the maximum send rate (a token bucket
one second deep, refilled at the rate) or beyond the 24-hour quota gets a throttling answer (429
TooManyRequestsException) and is not accepted.

The default is large enough never to hold a test or a benchmark back; a test, the demo or
`--max-send-rate`/`--max-24-hour-send` set a real one. `get_account` = "deny" answers GetAccount with
403 AccessDeniedException, as for a role without ses:GetAccount. `sandbox` = true answers GetAccount as
an account still in the SES sandbox (ProductionAccessEnabled false), with the sandbox's quota of 1
send a second and 200 a day unless the same call sets others.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass, field
from typing import Any

DAY_SECONDS = 86400.0
RATE_EXCEEDED = "Maximum sending rate exceeded."
DAILY_EXCEEDED = "Daily message quota exceeded."
# What SES gives an account in the sandbox.
SANDBOX_SEND_RATE = 1.0
SANDBOX_24_HOUR_SEND = 200.0


@dataclass
class AccountQuota:
    max_send_rate: float = 10000.0
    max_24_hour_send: float = 10_000_000.0  # -1: unlimited, as SES writes it
    # Sent in the last 24 hours before this endpoint's own sends (a test starts a day part used).
    sent_before: int = 0
    get_account: str = "allow"  # or "deny"
    sandbox: bool = False
    throttled: int = 0
    _tokens: float = -1.0  # -1: full, set on first use
    _stamp: float = 0.0
    _sent_at: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def configure(self, settings: dict[str, Any]) -> None:
        """Replace the quota (the bucket starts full again); the sends already counted stay."""
        unknown = set(settings) - {
            "max_send_rate",
            "max_24_hour_send",
            "sent_before",
            "get_account",
            "sandbox",
        }
        if unknown:
            raise ValueError(f"unknown quota settings: {', '.join(sorted(unknown))}")
        if settings.get("get_account", "allow") not in ("allow", "deny"):
            raise ValueError("get_account must be allow or deny")
        if not isinstance(settings.get("sandbox", False), bool):
            raise ValueError("sandbox must be true or false")
        with self.lock:
            if settings.get("sandbox"):
                self.max_send_rate, self.max_24_hour_send = SANDBOX_SEND_RATE, SANDBOX_24_HOUR_SEND
            for name in ("max_send_rate", "max_24_hour_send", "sent_before", "get_account", "sandbox"):
                if name in settings:
                    setattr(self, name, type(getattr(self, name))(settings[name]))
            self._tokens = -1.0

    def reset(self) -> None:
        with self.lock:
            self._sent_at.clear()
            self.throttled = 0
            self._tokens = -1.0

    def sent_last_24_hours(self, now: float | None = None) -> int:
        now = time.time() if now is None else now
        with self.lock:
            return (
                self.sent_before + len(self._sent_at) - bisect.bisect_left(self._sent_at, now - DAY_SECONDS)
            )

    def admit(self) -> str | None:
        """Take this send out of the quota: None if it may go, else the throttling answer's message."""
        now = time.time()
        used = self.sent_last_24_hours(now)
        with self.lock:
            if 0 <= self.max_24_hour_send <= used:
                self.throttled += 1
                return DAILY_EXCEEDED
            burst = max(1.0, self.max_send_rate)
            if self._tokens < 0:
                self._tokens, self._stamp = burst, now
            self._tokens = min(burst, self._tokens + (now - self._stamp) * self.max_send_rate)
            self._stamp = now
            if self._tokens < 1.0:
                self.throttled += 1
                return RATE_EXCEEDED
            self._tokens -= 1.0
            return None

    def accepted(self, at: float) -> None:
        with self.lock:
            self._sent_at.append(at)

    def get_account_answer(self) -> dict[str, Any]:
        """GetAccount's body (SESv2), with the fields boto3 users read."""
        sent = self.sent_last_24_hours()
        return {
            "DedicatedIpAutoWarmupEnabled": False,
            "EnforcementStatus": "HEALTHY",
            "ProductionAccessEnabled": not self.sandbox,
            "SendingEnabled": True,
            "SendQuota": {
                "Max24HourSend": self.max_24_hour_send,
                "MaxSendRate": self.max_send_rate,
                "SentLast24Hours": float(sent),
            },
        }

    def describe(self) -> dict[str, Any]:
        return {
            "max_send_rate": self.max_send_rate,
            "max_24_hour_send": self.max_24_hour_send,
            "sent_last_24_hours": self.sent_last_24_hours(),
            "get_account": self.get_account,
            "sandbox": self.sandbox,
            "throttled": self.throttled,
        }
