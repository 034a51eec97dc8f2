"""Whether the server's settings let a crash lose a committed transition (docs/operations.md,
"Durability settings").

The outbox's promises rest on the database keeping what it said it committed: a lost enqueue is a lost
email, a lost start mark or finalize can send an email twice. `migrate`, the worker and `status` read
the server's settings here and name each one that lets a crash lose a commit, with the risk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Every server variable the rules read: one query, by any DB-API cursor (mysql-connector or PyMySQL).
VARIABLES = (
    "innodb_flush_log_at_trx_commit",
    "sync_binlog",
    "log_bin",
    "wsrep_on",
    "wsrep_provider_options",
    "rpl_semi_sync_master_enabled",
    "rpl_semi_sync_master_wait_point",
)
JEPSEN_GALERA = "https://jepsen.io/analyses/mariadb-galera-cluster-12.1.2"


@dataclass(frozen=True)
class DurabilityRisk:
    setting: str
    value: str
    risk: str

    def describe(self) -> str:
        return f"{self.setting}={self.value}: {self.risk}"


def read_settings(cursor: Any) -> dict[str, str]:
    """The server's values of VARIABLES (a server that lacks one leaves it out)."""
    names = ", ".join(f"'{name}'" for name in VARIABLES)
    cursor.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
    settings = {}
    for row in cursor.fetchall():
        name, value = (row["Variable_name"], row["Value"]) if isinstance(row, dict) else (row[0], row[1])
        settings[str(name).lower()] = str(value)
    return settings


def _on(value: str | None) -> bool:
    return str(value).upper() in ("ON", "1", "TRUE", "YES")


def _provider_option(options: str, name: str) -> str | None:
    for item in options.split(";"):
        key, _, value = item.partition("=")
        if key.strip() == name:
            return value.strip()
    return None


def durability_risks(settings: dict[str, str]) -> list[DurabilityRisk]:
    """Each setting that lets a crash or a partition lose a committed transition, with what it risks."""
    risks: list[DurabilityRisk] = []
    galera = _on(settings.get("wsrep_on"))
    flush = settings.get("innodb_flush_log_at_trx_commit")
    if flush is not None and flush != "1":
        lost_by = (
            "a crash of the server process (kill -9, out of memory)"
            if flush == "0"
            else "an operating-system crash or power loss"
        )
        where = (
            f" of every node within about a second (Jepsen, MariaDB Galera 12.1.2: {JEPSEN_GALERA})"
            if galera
            else ""
        )
        risks.append(
            DurabilityRisk(
                "innodb_flush_log_at_trx_commit",
                flush,
                f"{lost_by}{where} loses about the last second of committed transitions: an enqueued"
                " email lost, or a send's start mark or finalize lost and the email sent twice; set it to 1",
            )
        )
    # With the binary log on, a crash recovers a prepared transaction only if its binlog event was
    # written; on a Galera node the cluster's replication, not the binlog, carries the commit.
    sync_binlog = settings.get("sync_binlog")
    if _on(settings.get("log_bin")) and not galera and sync_binlog is not None and sync_binlog != "1":
        risks.append(
            DurabilityRisk(
                "sync_binlog",
                sync_binlog,
                "an operating-system crash or power loss can lose committed transitions from the binary"
                " log, which crash recovery and every replica follow: a failover to a replica loses them"
                " too; set it to 1",
            )
        )
    if galera:
        options = settings.get("wsrep_provider_options", "")
        for option in ("pc.ignore_sb", "pc.ignore_quorum"):
            value = _provider_option(options, option)
            if value is not None and _on(value):
                risks.append(
                    DurabilityRisk(
                        option,
                        value,
                        "a node cut off from the majority keeps committing; when the partition heals one"
                        " side's transitions are lost (emails sent twice or lost); set it to false",
                    )
                )
    wait_point = settings.get("rpl_semi_sync_master_wait_point")
    if (
        _on(settings.get("rpl_semi_sync_master_enabled"))
        and wait_point
        and wait_point.upper() != "AFTER_SYNC"
    ):
        risks.append(
            DurabilityRisk(
                "rpl_semi_sync_master_wait_point",
                wait_point,
                "the primary shows a commit to other sessions before a replica has it: a failover after"
                " a crash can lose a transition a worker already acted on; set it to AFTER_SYNC",
            )
        )
    return risks


def server_durability_risks(cursor: Any) -> list[DurabilityRisk]:
    return durability_risks(read_settings(cursor))


WARNING_PREFIX = "durability setting may lose committed transitions"
