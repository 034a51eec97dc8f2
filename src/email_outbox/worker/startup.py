"""Before the first claim: wait for the database, check the schema and the default sender, and serve
/metrics and /healthz if asked to."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from email_outbox.db.durability import server_durability_risks
from email_outbox.errors import AccessDenied, ConfigError, DatabaseUnavailable, SchemaNotInstalled
from email_outbox.schema.grants import WORKER_PROCEDURES
from email_outbox.schema.routines import check_drift
from email_outbox.version import FIRST_RECORDING_RELEASE, SchemaRelease
from email_outbox.worker.config import WorkerConfig
from email_outbox.worker.database import DatabaseCalls
from email_outbox.worker.stats import WorkerStats

if TYPE_CHECKING:
    from email_outbox.db.repository import OutboxRepository
    from email_outbox.metrics_server import MetricsServer

log = logging.getLogger("email_outbox.worker")

# The worker role's procedures (email_outbox.schema.grants): all must be installed before a worker starts.
REQUIRED_PROCEDURES = frozenset(WORKER_PROCEDURES)


def wait_for_database(database: DatabaseCalls, stopping: threading.Event) -> None:
    pause = 0.5
    while not stopping.is_set():
        try:
            database.repository().server_version()
            return
        except DatabaseUnavailable as exc:
            database.drop()
            log.error("database unavailable at start, waiting", extra={"error": str(exc)})
            stopping.wait(pause)
            pause = min(pause * 2, 10.0)


def check_schema(database: DatabaseCalls, config: WorkerConfig) -> None:
    repo = database.repository()
    missing = REQUIRED_PROCEDURES - repo.installed_procedures()
    if missing:
        raise SchemaNotInstalled(
            f"procedures missing from {config.dsn.database}, or not granted to this account:"
            f" {', '.join(sorted(missing))}; run `email-outbox migrate` (migration 0001_schema plus"
            " procedures/) first, then `email-outbox grant worker ...` again if this release added one"
        )
    if config.default_from and not repo.sender_allowed(config.default_from):
        raise ConfigError(
            f"the default sender {config.default_from} is not on the sender allow-list for every"
            f" account: email-outbox senders add {config.default_from} --by NAME --reason TEXT"
        )
    try:
        cursor = repo.connection.cursor()
        drift = check_drift(cursor, only=WORKER_PROCEDURES)
        cursor.close()
        if not drift.clean:
            log.warning(
                "installed procedures differ from this release's procedures/",
                extra={"drift": drift.describe()},
            )
    except Exception as exc:  # the check is advice; an account without metadata access still runs
        log.warning("could not compare installed procedures", extra={"error": str(exc)})
    warn_durability(repo.connection)
    warn_schema_release(repo)


# Fixed text, as `status` says it (SchemaRelease.describe): alerts match the message, the versions are in
# its fields.
SCHEMA_RELEASE_WARNING = "database schema release differs from this package's"


def warn_schema_release(repo: OutboxRepository) -> None:
    """One WARNING when the release that last migrated the database is older or newer than this
    package: an older schema lacks what this worker may call, a newer one may have changed it."""
    try:
        release = SchemaRelease(repo.schema_release())
    except AccessDenied:
        log.warning(
            "could not read the database's schema release",
            extra={"error": "email_outbox_release not granted: run `email-outbox grant worker` again"},
        )
        return
    if release.state != "current":
        log.warning(
            SCHEMA_RELEASE_WARNING,
            extra={
                "schema_release": release.database or f"before {FIRST_RECORDING_RELEASE}",
                "package_version": release.package,
                "detail": release.describe(),
            },
        )


def warn_durability(connection: Any) -> None:
    """One WARNING when the server's settings let a crash lose a committed transition."""
    try:
        cursor = connection.cursor()
        risks = server_durability_risks(cursor)
        cursor.close()
    except Exception as exc:  # advice too: never a reason not to deliver
        log.warning("could not read the server's durability settings", extra={"error": str(exc)})
        return
    if risks:
        # One line, its text fixed (WARNING_PREFIX) so alerts can match it; the risks in its fields.
        log.warning(
            "durability setting may lose committed transitions",
            extra={"risks": "; ".join(r.describe() for r in risks)},
        )


def start_metrics(
    config: WorkerConfig, stats: WorkerStats, database: DatabaseCalls, stopping: threading.Event
) -> MetricsServer:
    from email_outbox.worker.metrics import start_metrics as serve

    assert config.metrics_port is not None
    server, _ = serve(
        stats,
        config.worker_id,
        database.open_repository,
        stopping,
        host=config.metrics_host,
        port=config.metrics_port,
        stats_interval=config.stats_interval,
        stale_after=config.health_stale_seconds,
        provider_enabled=config.provider_enabled,
    )
    log.info(
        "metrics and health served",
        extra={"metrics_url": f"http://{config.metrics_host}:{server.port}/metrics"},
    )
    return server
