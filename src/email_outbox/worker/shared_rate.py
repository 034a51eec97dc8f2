"""The SES account's send rate and daily quota, shared by every replica through the database.

The account's schedule of sends lives in one row (email_send_rate). A replica takes a slice of it with
email_send_rate_take: a few sends, each with the moment it may go (`tickets` here, on this process's
monotonic clock), and sends them no earlier; when they run out it takes the next slice. However many
replicas run, the slices do not overlap, so together they send at the account's rate. A ticket not
used within TICKET_GRACE_SECONDS of its moment lapses (a late ticket would make a burst) and is
reported with the next take, so the day's count forgets it.

Who reads GetAccount: every replica at start, then the one the database names (refresh_due) at most
every `account_refresh_seconds`. What it reports: the override when set, else what SES said, else
(GetAccount refused) the conservative default, with one WARNING; never unlimited.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from email_outbox.db.send_rate_calls import PAUSED_DAILY_QUOTA, RateSlice
from email_outbox.errors import DatabaseUnavailable, SchemaNotInstalled, TransientDatabaseError
from email_outbox.ses.account import AccountQuota, AccountReader, AccountUnreadable
from email_outbox.worker.config import ACCOUNT_RATE_LIMIT, DAILY_QUOTA_LIMIT, WorkerConfig
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.stats import WorkerStats

log = logging.getLogger("email_outbox.worker")

# GetAccount refused and no override: an SES sandbox account's quota, the smallest SES gives.
DEFAULT_SEND_RATE = 1.0
DEFAULT_DAILY_QUOTA = 200
# The schedule is handed out a little under the account's rate: sends leave a replica with some timing
# jitter, and SES answers any send beyond its rate with a throttling error.
PACE_SHARE = 0.95
# SES throttled anyway: the shared rate is cut to this share, then grows back over this many seconds.
THROTTLE_CUT_SHARE = 0.8
THROTTLE_RECOVER_SECONDS = 20.0
TICKET_GRACE_SECONDS = 1.0
# A send may go this much before its moment, so one claim serves several free slots (at 9,500/s a
# slice's moments are 0.1 ms apart: taken one by one, every claim was of one row). SES tolerates
# bursts of up to a second of its rate; this is 50 ms of it.
EARLY_SECONDS = 0.05
# A replica asks for up to this many times its send slots per slice (the database grants at most
# 0.25 s of the rate): one take serves several claims when the rate is high.
SLOTS_PER_ASK = 4
DATABASE_TROUBLE = (DatabaseUnavailable, TransientDatabaseError, SchemaNotInstalled)


class SharedRate:
    def __init__(
        self,
        config: WorkerConfig,
        database: DatabaseCalls,
        stats: WorkerStats,
        account: AccountReader,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._database = database
        self._stats = stats
        self._account = account
        self._clock = clock
        self._tickets: deque[float] = deque()
        self._unused = 0
        self._ask_after = 0.0
        self._paused: str | None = None
        self._lock = threading.Lock()
        self._fetching = threading.Lock()
        self._last_quota: AccountQuota | None = None
        self._warned = False
        self._reported = False

    # --- sends --------------------------------------------------------------------------------------
    def take(self, wanted: int, stopping: threading.Event) -> int:
        """Wait until at least one send is due, then take up to `wanted` of those due. 0 when
        stopping, or after up to a poll interval while the daily quota is used up or the database
        does not answer (the claim loop turns meanwhile)."""
        while not stopping.is_set():
            taken, wait = self._take_now(wanted, block=True)
            if taken:
                return taken
            if self._paused is not None or wait >= self._config.poll_interval:
                stopping.wait(min(wait, self._config.poll_interval))
                return 0
            stopping.wait(wait)
        return 0

    def take_at_hand(self, wanted: int) -> int:
        """Up to `wanted` sends due now; never waits (it may take a slice if none is held)."""
        return self._take_now(wanted, block=False)[0]

    def give_back(self, count: int) -> None:
        """Sends taken and not made (a claim found fewer rows): due again at once, until they lapse."""
        if count <= 0:
            return
        with self._lock:
            now = self._clock()
            self._tickets.extendleft([min(now, self._tickets[0]) if self._tickets else now] * count)

    @property
    def paused(self) -> str | None:
        return self._paused

    def _take_now(self, wanted: int, block: bool) -> tuple[int, float]:
        taken, wait = self._from_pool(wanted)
        if taken or wait is not None:
            return taken, wait or 0.0
        if not self._fetching.acquire(blocking=block):
            return 0, 0.0
        try:
            taken, wait = self._from_pool(wanted)  # another thread may have taken a slice meanwhile
            if taken or wait is not None:
                return taken, wait or 0.0
            self._take_slice()
        finally:
            self._fetching.release()
        taken, wait = self._from_pool(wanted)
        return taken, wait if wait is not None else 0.0

    def _from_pool(self, wanted: int) -> tuple[int, float | None]:
        """(taken, None) when sends were due; (0, seconds) when the next is that far off; (0, None)
        when a slice must be asked for."""
        with self._lock:
            now = self._clock()
            while self._tickets and self._tickets[0] < now - TICKET_GRACE_SECONDS:
                self._tickets.popleft()
                self._unused += 1
            taken = 0
            while taken < wanted and self._tickets and self._tickets[0] <= now + EARLY_SECONDS:
                self._tickets.popleft()
                taken += 1
            if taken:
                return taken, None
            if self._tickets:
                return 0, self._tickets[0] - EARLY_SECONDS - now
            if now < self._ask_after:
                return 0, self._ask_after - now
            return 0, None

    def _take_slice(self) -> None:
        config = self._config
        with self._lock:
            unused, self._unused = self._unused, 0
        ask = max(config.concurrency, config.batch_size) * SLOTS_PER_ASK
        try:
            answer = self._database.call(
                "email_send_rate_take",
                lambda r: r.send_rate_take(config.worker_id, ask, unused, config.account_refresh_seconds),
            )
        except DATABASE_TROUBLE as exc:
            log.warning("taking a slice of the send rate failed", extra={"error": str(exc)})
            with self._lock:
                self._unused += unused
                self._ask_after = self._clock() + config.poll_interval
            return
        now = self._clock()
        with self._lock:
            first = now + answer.start_in_seconds
            self._tickets.extend(first + i * answer.interval_seconds for i in range(answer.granted))
            self._ask_after = now + (answer.wait_seconds if not answer.granted else 0.0)
        self._note(answer)
        if answer.refresh_due:
            self.refresh_account()
            with self._lock:
                self._ask_after = 0.0

    def _note(self, answer: RateSlice) -> None:
        if answer.paused != self._paused:
            if answer.paused == PAUSED_DAILY_QUOTA:
                log.warning(
                    "daily quota used up: claiming nothing until GetAccount shows room",
                    extra={"daily_used": answer.daily_used, "daily_quota": answer.daily_quota},
                )
            elif self._paused is not None:
                log.info("daily quota has room again: claiming", extra={"daily_used": answer.daily_used})
        self._paused = answer.paused
        with self._stats.lock:
            self._stats.send_rate = answer

    # --- throttling ---------------------------------------------------------------------------------
    def throttled(self) -> None:
        """SES throttled a send: cut the shared rate (at most once a second for all replicas)."""
        try:
            self._database.call(
                "email_send_rate_throttled",
                lambda r: r.send_rate_throttled(
                    self._config.worker_id, THROTTLE_CUT_SHARE, THROTTLE_RECOVER_SECONDS
                ),
            )
        except DATABASE_TROUBLE as exc:
            log.warning("could not slow the shared send rate down", extra={"error": str(exc)})

    # --- the account's quota ------------------------------------------------------------------------
    def refresh_account(self) -> None:
        """Read GetAccount and report the quota in force to every replica (through the database)."""
        config = self._config
        try:
            quota: AccountQuota | None = self._account.read()
            self._last_quota = quota
            sent: int | None = quota.sent_last_24_hours if quota else None
        except AccountUnreadable as exc:
            # A read that worked before keeps its figures; the day's count goes on from what was sent.
            quota, sent = self._last_quota, None
            level = logging.DEBUG if self._warned else logging.WARNING
            self._warned = True
            log.log(
                level,
                "SES GetAccount failed: using the last figures read, else the override, else the"
                f" conservative default ({DEFAULT_SEND_RATE:g}/s, {DEFAULT_DAILY_QUOTA} a day);"
                " allow ses:GetAccount or set --account-send-rate and --account-daily-quota",
                extra={"error": str(exc)},
            )
        if config.account_send_rate is not None:
            rate, rate_source = config.account_send_rate, "override"
        elif quota is not None:
            rate, rate_source = min(quota.max_send_rate, ACCOUNT_RATE_LIMIT), "ses"
        else:
            rate, rate_source = DEFAULT_SEND_RATE, "default"
        daily: int | None
        if config.account_daily_quota is not None:
            daily, daily_source = config.account_daily_quota, "override"
        elif quota is not None:
            # An answer of 0 (an account SES paused) is kept as 1: the procedure refuses 0.
            ses_daily = quota.max_24_hour_send
            daily = None if ses_daily is None else min(max(ses_daily, 1), DAILY_QUOTA_LIMIT)
            daily_source = "ses"
        else:
            daily, daily_source = DEFAULT_DAILY_QUOTA, "default"
        try:
            self._database.call(
                "email_send_rate_report",
                lambda r: r.send_rate_report(
                    config.worker_id, rate, rate_source, rate * PACE_SHARE, daily, daily_source, sent
                ),
            )
        except DATABASE_TROUBLE as exc:
            log.warning("could not report the account's quota", extra={"error": str(exc)})
            return
        level = logging.DEBUG if self._reported else logging.INFO
        self._reported = True
        log.log(
            level,
            "SES account quota",
            extra={"send_rate": rate, "rate_source": rate_source, "daily_quota": daily, "sent_24h": sent},
        )
