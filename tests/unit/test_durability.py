"""Which server settings the outbox names as able to lose a committed transition (docs/operations.md,
"Durability settings")."""

from __future__ import annotations

import pytest

from email_outbox.db.connection import SUSPECTS, _Suspects
from email_outbox.db.durability import durability_risks

SAFE = {"innodb_flush_log_at_trx_commit": "1", "sync_binlog": "1", "log_bin": "ON", "wsrep_on": "OFF"}


def settings(**changes: str) -> dict[str, str]:
    return {**SAFE, **changes}


def test_the_documented_settings_carry_no_risk() -> None:
    assert durability_risks(SAFE) == []
    galera = settings(
        wsrep_on="ON", sync_binlog="0", wsrep_provider_options="gcache.size=128M; pc.ignore_sb=false"
    )
    assert durability_risks(galera) == []


@pytest.mark.parametrize(("flush", "words"), [("0", "crash of the server process"), ("2", "power loss")])
def test_flush_log_other_than_1_is_named_with_what_it_loses(flush: str, words: str) -> None:
    (risk,) = durability_risks(settings(innodb_flush_log_at_trx_commit=flush))
    assert (risk.setting, risk.value) == ("innodb_flush_log_at_trx_commit", flush)
    assert words in risk.risk and "sent twice" in risk.risk and "set it to 1" in risk.risk


def test_on_galera_the_flush_risk_cites_the_all_node_crash() -> None:
    (risk,) = durability_risks(settings(wsrep_on="ON", innodb_flush_log_at_trx_commit="2"))
    assert "every node" in risk.risk and "jepsen.io" in risk.risk


def test_sync_binlog_matters_only_where_the_binlog_carries_the_commit() -> None:
    (risk,) = durability_risks(settings(sync_binlog="0"))
    assert risk.setting == "sync_binlog"
    assert durability_risks(settings(sync_binlog="0", log_bin="OFF")) == []
    assert durability_risks(settings(sync_binlog="0", wsrep_on="ON")) == []


def test_galera_quorum_overrides_are_named() -> None:
    options = "gcache.size=64M; pc.ignore_sb=true; pc.ignore_quorum=false"
    (risk,) = durability_risks(settings(wsrep_on="ON", wsrep_provider_options=options))
    assert (risk.setting, risk.value) == ("pc.ignore_sb", "true")


def test_semi_sync_after_commit_is_named() -> None:
    risky = settings(rpl_semi_sync_master_enabled="ON", rpl_semi_sync_master_wait_point="AFTER_COMMIT")
    assert [r.setting for r in durability_risks(risky)] == ["rpl_semi_sync_master_wait_point"]
    after_sync = settings(rpl_semi_sync_master_enabled="ON", rpl_semi_sync_master_wait_point="AFTER_SYNC")
    assert durability_risks(after_sync) == []


def test_hosts_that_failed_lately_are_tried_last_in_the_dsn_order() -> None:
    suspects = _Suspects()
    hosts = [("a", 1), ("b", 1), ("c", 1)]
    suspects.mark("a", 1)
    suspects.mark("b", 1)
    assert suspects.order(hosts) == [("c", 1), ("a", 1), ("b", 1)]
    assert SUSPECTS.order(hosts) == hosts, "the process-wide record starts empty"
