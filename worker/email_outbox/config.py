"""Worker configuration: flags over environment over defaults, validated once at start."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from email_outbox.dsn import DatabaseDsn
from email_outbox.errors import ConfigError

ENV_PREFIX = "EMAIL_OUTBOX_"


@dataclass(frozen=True)
class WorkerConfig:
    dsn: DatabaseDsn
    default_from: str | None
    worker_id: str
    lease_seconds: int = 120
    concurrency: int = 8
    batch_size: int = 8
    poll_interval: float = 1.0
    max_send_rate: float | None = None
    retry_base_seconds: float = 5.0
    retry_max_seconds: float = 900.0
    ses_configuration_set: str | None = None
    provider_enabled: bool = True
    ses_connect_timeout: float = 5.0
    ses_read_timeout: float = 20.0
    shutdown_grace_seconds: float = 30.0
    throttle_delay_seconds: int = 5
    account_pause_seconds: float = 60.0
    log_format: str = "text"
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    stats_interval: float = 15.0
    health_stale_seconds: float = 30.0
    inline_body_bytes: int = 262144
    body_memory_bytes: int = 16777216


_SPEC: dict[str, tuple[str, Any]] = {
    # field: (environment suffix, parser)
    "dsn": ("DSN", str),
    "default_from": ("DEFAULT_FROM", str),
    "worker_id": ("WORKER_ID", str),
    "lease_seconds": ("LEASE_SECONDS", int),
    "concurrency": ("CONCURRENCY", int),
    "batch_size": ("BATCH_SIZE", int),
    "poll_interval": ("POLL_INTERVAL", float),
    "max_send_rate": ("MAX_SEND_RATE", float),
    "retry_base_seconds": ("RETRY_BASE_SECONDS", float),
    "retry_max_seconds": ("RETRY_MAX_SECONDS", float),
    "ses_configuration_set": ("SES_CONFIGURATION_SET", str),
    "provider_enabled": ("PROVIDER_ENABLED", "bool"),
    "ses_connect_timeout": ("SES_CONNECT_TIMEOUT", float),
    "ses_read_timeout": ("SES_READ_TIMEOUT", float),
    "shutdown_grace_seconds": ("SHUTDOWN_GRACE_SECONDS", float),
    "throttle_delay_seconds": ("THROTTLE_DELAY_SECONDS", int),
    "account_pause_seconds": ("ACCOUNT_PAUSE_SECONDS", float),
    "log_format": ("LOG_FORMAT", str),
    "metrics_port": ("METRICS_PORT", int),
    "metrics_host": ("METRICS_HOST", str),
    "stats_interval": ("STATS_INTERVAL", float),
    "health_stale_seconds": ("HEALTH_STALE_SECONDS", float),
    "inline_body_bytes": ("INLINE_BODY_BYTES", int),
    "body_memory_bytes": ("BODY_MEMORY_BYTES", int),
}

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
    for field in _SPEC:
        if flags.get(field) is not None:
            values[field] = _parse(field, flags[field])
        elif env_name(field) in environ:
            values[field] = _parse(field, environ[env_name(field)])
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
    _check(c.retry_base_seconds > 0, f"{env_name('retry_base_seconds')} must be above 0")
    _check(
        c.retry_base_seconds <= c.retry_max_seconds <= 604800,
        f"{env_name('retry_max_seconds')} must be at least the base and at most 604800",
    )
    _check(c.ses_connect_timeout > 0, f"{env_name('ses_connect_timeout')} must be above 0")
    _check(c.ses_read_timeout > 0, f"{env_name('ses_read_timeout')} must be above 0")
    # A send that can outlive its lease would be swept to UnknownOutcome while still in flight, and its
    # finalize refused. Half the lease leaves room for the finalize and for retrying it.
    _check(
        c.ses_connect_timeout + c.ses_read_timeout <= c.lease_seconds / 2,
        f"SES connect timeout + read timeout ({c.ses_connect_timeout:g}s + {c.ses_read_timeout:g}s) must be at most"
        f" half the lease ({c.lease_seconds}s / 2): raise {env_name('lease_seconds')} or lower the timeouts",
    )
    _check(c.shutdown_grace_seconds >= 0, f"{env_name('shutdown_grace_seconds')} must be 0 or more")
    _check(
        0 <= c.throttle_delay_seconds <= 604800, f"{env_name('throttle_delay_seconds')} must be 0 to 604800"
    )
    _check(c.account_pause_seconds > 0, f"{env_name('account_pause_seconds')} must be above 0")
    _check(
        c.log_format in ("text", "json"),
        f"{env_name('log_format')} must be text or json (got {c.log_format})",
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


def aws_region(environ: Mapping[str, str] | None = None) -> str | None:
    """boto3 reads only AWS_DEFAULT_REGION; many platforms set only AWS_REGION. Honour both."""
    environ = os.environ if environ is None else environ
    return environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None
