"""Worker configuration: flags over environment over defaults, validated once at start."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.errors import ConfigError
from email_outbox.ses.settings import SES_CLIENTS

ENV_PREFIX = "EMAIL_OUTBOX_"
LOG_LEVELS = ("debug", "info", "warning", "error")


def _meta(env: str, parse: Any, help: str) -> dict[str, Any]:
    """What a setting declares beside its type and default: its environment variable, its parser and
    its help. Each setting is one line of WorkerConfig; flags, env parsing and the README table all
    come from there."""
    return {"env": env, "parse": parse, "help": help}


# The most a worker may report for the whole account (email_send_rate_report refuses more): one
# replica's account must not be able to unpace every replica, nor stop them with a quota of 0.
ACCOUNT_RATE_LIMIT = 10_000
DAILY_QUOTA_LIMIT = 1_000_000_000
# The longest email_breaker_open lets one replica hold every replica before the next probe.
PROBE_DELAY_LIMIT_SECONDS = 3600
# The most distinct failing emails a replica keeps in mind for the broad rule (breaker_broad_emails).
BROAD_EMAILS_LIMIT = 10_000


@dataclass(frozen=True)
class WorkerConfig:
    dsn: DatabaseDsn = field(
        metadata=_meta("DSN", str, "the database: mysql://user:password@host:port/database (required)")
    )
    default_from: str | None = field(
        metadata=_meta("DEFAULT_FROM", str, "sender for rows with no from_address; must be on the allow-list")
    )
    worker_id: str = field(
        metadata=_meta("WORKER_ID", str, "this replica's name in claimed_by (default host:pid)")
    )
    lease_seconds: int = field(default=120, metadata=_meta("LEASE_SECONDS", int, "claim lease, seconds"))
    concurrency: int = field(default=8, metadata=_meta("CONCURRENCY", int, "sends in flight per replica"))
    batch_size: int = field(
        default=8, metadata=_meta("BATCH_SIZE", int, "rows per claim, at most the free send slots")
    )
    poll_interval: float = field(
        default=1.0, metadata=_meta("POLL_INTERVAL", float, "longest idle wait between claims, seconds")
    )
    max_send_rate: float | None = field(
        default=None,
        metadata=_meta(
            "MAX_SEND_RATE",
            float,
            "a cap for this replica alone, under the account's shared rate (default none)",
        ),
    )
    account_send_rate: float | None = field(
        default=None,
        metadata=_meta(
            "ACCOUNT_SEND_RATE",
            float,
            "sends per second for the whole SES account, all replicas together; overrides GetAccount's"
            " MaxSendRate (default: read from SES)",
        ),
    )
    account_daily_quota: int | None = field(
        default=None,
        metadata=_meta(
            "ACCOUNT_DAILY_QUOTA",
            int,
            "sends per 24 hours for the whole SES account; overrides GetAccount's Max24HourSend",
        ),
    )
    account_refresh_seconds: int = field(
        default=60,
        metadata=_meta(
            "ACCOUNT_REFRESH_SECONDS", int, "how often one replica reads GetAccount again for all, seconds"
        ),
    )
    retry_base_seconds: float = field(
        default=5.0,
        metadata=_meta("RETRY_BASE_SECONDS", float, "backoff base for transient failures, seconds"),
    )
    retry_max_seconds: float = field(
        default=900.0, metadata=_meta("RETRY_MAX_SECONDS", float, "backoff cap, seconds")
    )
    ses_configuration_set: str | None = field(
        default=None, metadata=_meta("SES_CONFIGURATION_SET", str, "SES configuration set for every send")
    )
    provider_enabled: bool = field(
        default=True,
        metadata=_meta("PROVIDER_ENABLED", "bool", "false: claim nothing and idle (also --disable-provider)"),
    )
    db_read_timeout: float = field(
        default=5.0,
        metadata=_meta(
            "DB_READ_TIMEOUT",
            float,
            "seconds a database call may wait for the server's answer before the connection counts as"
            " lost and the call moves to another host of the DSN (a paused or cut-off node)",
        ),
    )
    ses_connect_timeout: float = field(default=5.0, metadata=_meta("SES_CONNECT_TIMEOUT", float, "seconds"))
    ses_read_timeout: float = field(
        default=20.0,
        metadata=_meta("SES_READ_TIMEOUT", float, "seconds; connect + read must be at most half the lease"),
    )
    ses_client: str = field(
        default="lean",
        metadata=_meta(
            "SES_CLIENT",
            str,
            "lean (botocore's signer and HTTP session without boto3's per-call work) or boto3 (its"
            " sesv2 client); both classify every outcome alike",
        ),
    )
    shutdown_grace_seconds: float = field(
        default=30.0,
        metadata=_meta("SHUTDOWN_GRACE_SECONDS", float, "how long SIGTERM waits for in-flight sends"),
    )
    throttle_delay_seconds: int = field(
        default=5,
        metadata=_meta("THROTTLE_DELAY_SECONDS", int, "release delay after SES throttling, seconds"),
    )
    account_pause_seconds: float = field(
        default=60.0,
        metadata=_meta(
            "ACCOUNT_PAUSE_SECONDS", float, "pause after an account or configuration error, seconds"
        ),
    )
    tenant_guard_complaint_rate: float = field(
        default=0.001,
        metadata=_meta(
            "TENANT_GUARD_COMPLAINT_RATE",
            float,
            "a tenant's complaints per send over 24 h that hold its lower-priority sends (SES reviews at 0.1%)",
        ),
    )
    tenant_guard_bounce_rate: float = field(
        default=0.05,
        metadata=_meta(
            "TENANT_GUARD_BOUNCE_RATE",
            float,
            "a tenant's permanent bounces per send over 24 h that hold its lower-priority sends (SES reviews at 5%)",
        ),
    )
    tenant_guard_min_sends: int = field(
        default=200,
        metadata=_meta(
            "TENANT_GUARD_MIN_SENDS", int, "the tenant's sends in 24 h before its rates are judged at all"
        ),
    )
    tenant_guard_below_priority: int = field(
        default=7,
        metadata=_meta(
            "TENANT_GUARD_BELOW_PRIORITY",
            int,
            "a guarded tenant's rows below this priority wait until `tenants resume` (1-9)",
        ),
    )
    breaker_failures: int = field(
        default=5,
        metadata=_meta(
            "BREAKER_FAILURES",
            int,
            "consecutive transient SES failures (5xx, refused, DNS, TLS handshake, connect timeout) with no"
            " success between them that open the provider breaker; 0 turns the breaker off",
        ),
    )
    breaker_distinct_emails: int = field(
        default=3,
        metadata=_meta(
            "BREAKER_DISTINCT_EMAILS",
            int,
            "... among at least this many different emails (one bad email never opens it)",
        ),
    )
    breaker_window_seconds: float = field(
        default=30.0,
        metadata=_meta("BREAKER_WINDOW_SECONDS", float, "... all within this many seconds"),
    )
    breaker_broad_emails: int = field(
        default=20,
        metadata=_meta(
            "BREAKER_BROAD_EMAILS",
            int,
            "this many different emails failing transiently with no accepted send between them open the"
            " breaker at any pace, even while SES answers GetAccount (SendEmail alone down); at least"
            " BREAKER_DISTINCT_EMAILS",
        ),
    )
    breaker_probe_seconds: float = field(
        default=15.0,
        metadata=_meta(
            "BREAKER_PROBE_SECONDS",
            float,
            "while the breaker is open, one probe send among all replicas every this many seconds, plus up"
            " to a third more as jitter",
        ),
    )
    log_format: str = field(default="text", metadata=_meta("LOG_FORMAT", str, "text or json"))
    log_level: str = field(
        default="info",
        metadata=_meta("LOG_LEVEL", str, "debug (a line per claim and per finalize), info, warning or error"),
    )
    progress_interval: float = field(
        default=10.0,
        metadata=_meta(
            "PROGRESS_INTERVAL", float, "seconds between the INFO lines counting what was finalized"
        ),
    )
    metrics_port: int | None = field(
        default=None,
        metadata=_meta("METRICS_PORT", int, "serve /metrics and /healthz on this port (default off)"),
    )
    metrics_host: str = field(
        default="127.0.0.1",
        metadata=_meta("METRICS_HOST", str, "address the metrics server binds; 0.0.0.0 exposes it"),
    )
    stats_interval: float = field(
        default=15.0,
        metadata=_meta("STATS_INTERVAL", float, "seconds between queue-depth reads for /metrics"),
    )
    health_stale_seconds: float = field(
        default=30.0,
        metadata=_meta(
            "HEALTH_STALE_SECONDS",
            float,
            "/healthz turns 503 when the loop or the database is silent this long",
        ),
    )
    inline_body_bytes: int = field(
        default=262144,
        metadata=_meta(
            "INLINE_BODY_BYTES",
            int,
            "bodies up to this size come with the claim; larger ones are loaded per send",
        ),
    )
    body_memory_bytes: int = field(
        default=16777216,
        metadata=_meta(
            "BODY_MEMORY_BYTES", int, "bytes of large bodies held at once by all sends of a replica"
        ),
    )

    @property
    def longest_send_seconds(self) -> float:
        """The longest one SendEmail call can take before botocore gives up: connect plus read."""
        return self.ses_connect_timeout + self.ses_read_timeout

    @property
    def stop_bound_seconds(self) -> float:
        """The longest a worker runs after SIGTERM, whatever its database hosts and SES do: the grace
        for the sends in flight, then two read timeouts to give back what it holds; then it exits
        without waiting for the calls still on the wire (docs/operations.md, "Stopping a worker")."""
        return self.shutdown_grace_seconds + 2 * self.db_read_timeout


SETTINGS = fields(WorkerConfig)
_SPEC: dict[str, tuple[str, Any]] = {f.name: (f.metadata["env"], f.metadata["parse"]) for f in SETTINGS}


def flag_help(setting: Field[Any]) -> str:
    """The --flag help: the declared help, its variable and its default."""
    default = "" if setting.default is MISSING or setting.default is None else f", default {setting.default}"
    return f"{setting.metadata['help']} (${ENV_PREFIX}{setting.metadata['env']}{default})".replace("%", "%%")


def settings_table() -> str:
    """The README's table of settings, generated from WorkerConfig (a test keeps the README in step)."""
    lines = ["| flag | environment | default | what |", "|---|---|---|---|"]
    for s in SETTINGS:
        default = "-" if s.default is MISSING or s.default is None else f"`{s.default}`"
        flag = "--" + s.name.replace("_", "-")
        lines.append(f"| `{flag}` | `{ENV_PREFIX}{s.metadata['env']}` | {default} | {s.metadata['help']} |")
    return "\n".join(lines)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def env_name(field: str) -> str:
    return ENV_PREFIX + _SPEC[field][0]


def _parse(field: str, raw: Any) -> Any:
    _, parser = _SPEC[field]
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    if parser == "bool":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{env_name(field)} must be true or false (got {raw!r})")
    if parser is str:
        return text or None
    try:
        return parser(text)
    except ValueError:
        kind = "an integer" if parser is int else "a number"
        raise ConfigError(f"{env_name(field)} must be {kind} (got {raw!r})") from None


def load_config(flags: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> WorkerConfig:
    """Build and validate the configuration. `flags` holds only the flags actually given."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for name in _SPEC:
        if flags.get(name) is not None:
            values[name] = _parse(name, flags[name])
        elif env_name(name) in environ:
            values[name] = _parse(name, environ[env_name(name)])
    if not values.get("dsn"):
        raise ConfigError(
            f"{env_name('dsn')} (or --dsn) is required: mysql://user:password@host:port/database"
        )
    values["dsn"] = DatabaseDsn.parse(values["dsn"])
    values.setdefault("default_from", None)
    if not values.get("worker_id"):
        values["worker_id"] = f"{socket.gethostname()}:{os.getpid()}"
    known = {f.name for f in fields(WorkerConfig)}
    config = WorkerConfig(**{k: v for k, v in values.items() if k in known})
    validate(config)
    return config


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def validate(c: WorkerConfig) -> None:
    _check(
        1 <= c.lease_seconds <= 86400,
        f"{env_name('lease_seconds')} must be 1 to 86400 (got {c.lease_seconds})",
    )
    _check(1 <= c.concurrency <= 1000, f"{env_name('concurrency')} must be 1 to 1000 (got {c.concurrency})")
    _check(1 <= c.batch_size <= 10000, f"{env_name('batch_size')} must be 1 to 10000 (got {c.batch_size})")
    _check(0 < c.poll_interval <= 3600, f"{env_name('poll_interval')} must be above 0 and at most 3600")
    _check(c.max_send_rate is None or c.max_send_rate > 0, f"{env_name('max_send_rate')} must be above 0")
    _check(
        c.account_send_rate is None or 0 < c.account_send_rate <= ACCOUNT_RATE_LIMIT,
        f"{env_name('account_send_rate')} must be above 0 and at most {ACCOUNT_RATE_LIMIT}",
    )
    _check(
        c.account_daily_quota is None or 1 <= c.account_daily_quota <= DAILY_QUOTA_LIMIT,
        f"{env_name('account_daily_quota')} must be 1 to {DAILY_QUOTA_LIMIT}",
    )
    _check(1 <= c.account_refresh_seconds <= 3600, f"{env_name('account_refresh_seconds')} must be 1 to 3600")
    _check(c.retry_base_seconds > 0, f"{env_name('retry_base_seconds')} must be above 0")
    _check(
        c.retry_base_seconds <= c.retry_max_seconds <= 604800,
        f"{env_name('retry_max_seconds')} must be at least the base and at most 604800",
    )
    _check(1 <= c.db_read_timeout <= 3600, f"{env_name('db_read_timeout')} must be 1 to 3600")
    _check(c.ses_connect_timeout > 0, f"{env_name('ses_connect_timeout')} must be above 0")
    _check(c.ses_read_timeout > 0, f"{env_name('ses_read_timeout')} must be above 0")
    # A send that can outlive its lease would be swept to UnknownOutcome while still in flight, and its
    # finalize refused. Half the lease leaves room for the finalize and for retrying it.
    _check(
        c.longest_send_seconds <= c.lease_seconds / 2,
        f"SES connect timeout + read timeout ({c.ses_connect_timeout:g}s + {c.ses_read_timeout:g}s) must be at most"
        f" half the lease ({c.lease_seconds}s / 2): raise {env_name('lease_seconds')} or lower the timeouts",
    )
    _check(
        c.ses_client in SES_CLIENTS,
        f"{env_name('ses_client')} must be one of {', '.join(SES_CLIENTS)} (got {c.ses_client})",
    )
    _check(c.shutdown_grace_seconds >= 0, f"{env_name('shutdown_grace_seconds')} must be 0 or more")
    _check(
        0 <= c.throttle_delay_seconds <= 604800, f"{env_name('throttle_delay_seconds')} must be 0 to 604800"
    )
    _check(0 <= c.breaker_failures <= 1000, f"{env_name('breaker_failures')} must be 0 to 1000")
    _check(
        # With the breaker off (0 failures) the count of emails is not used.
        c.breaker_distinct_emails >= 1
        and (c.breaker_failures == 0 or c.breaker_distinct_emails <= c.breaker_failures),
        f"{env_name('breaker_distinct_emails')} must be 1 to {env_name('breaker_failures')}",
    )
    _check(
        c.breaker_failures == 0 or c.breaker_distinct_emails <= c.breaker_broad_emails <= BROAD_EMAILS_LIMIT,
        f"{env_name('breaker_broad_emails')} must be {env_name('breaker_distinct_emails')} to"
        f" {BROAD_EMAILS_LIMIT}",
    )
    _check(
        0 < c.breaker_window_seconds <= 3600,
        f"{env_name('breaker_window_seconds')} must be above 0 and at most 3600",
    )
    _check(1 <= c.breaker_probe_seconds <= 3600, f"{env_name('breaker_probe_seconds')} must be 1 to 3600")
    _check(c.account_pause_seconds > 0, f"{env_name('account_pause_seconds')} must be above 0")
    _check(
        0 < c.tenant_guard_complaint_rate <= 1 and 0 < c.tenant_guard_bounce_rate <= 1,
        f"{env_name('tenant_guard_complaint_rate')} and {env_name('tenant_guard_bounce_rate')} must be above 0,"
        " at most 1",
    )
    _check(c.tenant_guard_min_sends >= 1, f"{env_name('tenant_guard_min_sends')} must be 1 or more")
    _check(
        1 <= c.tenant_guard_below_priority <= 9, f"{env_name('tenant_guard_below_priority')} must be 1 to 9"
    )
    _check(
        c.log_format in ("text", "json"),
        f"{env_name('log_format')} must be text or json (got {c.log_format})",
    )
    _check(
        c.log_level in LOG_LEVELS,
        f"{env_name('log_level')} must be one of {', '.join(LOG_LEVELS)} (got {c.log_level})",
    )
    _check(
        0 < c.progress_interval <= 86400, f"{env_name('progress_interval')} must be above 0 and at most 86400"
    )
    _check(
        c.metrics_port is None or 0 <= c.metrics_port <= 65535,
        f"{env_name('metrics_port')} must be 0 to 65535 (got {c.metrics_port})",
    )
    _check(0 < c.stats_interval <= 3600, f"{env_name('stats_interval')} must be above 0 and at most 3600")
    # A healthy loop turns at least once per poll interval; anything tighter would flap.
    _check(
        c.health_stale_seconds >= 2 * c.poll_interval,
        f"{env_name('health_stale_seconds')} must be at least twice the poll interval",
    )
    if c.default_from is not None:
        _check(
            c.default_from.count("@") == 1
            and not c.default_from.startswith("@")
            and not c.default_from.endswith("@"),
            f"{env_name('default_from')} must be an email address (got {c.default_from!r})",
        )
    _check(1 <= len(c.worker_id) <= 191, f"{env_name('worker_id')} must be 1 to 191 characters")
    _check(0 <= c.inline_body_bytes <= 16777215, f"{env_name('inline_body_bytes')} must be 0 to 16777215")
    _check(
        1048576 <= c.body_memory_bytes <= 2**40,
        f"{env_name('body_memory_bytes')} must be at least 1048576 (1 MiB)",
    )
