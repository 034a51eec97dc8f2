"""`email-outbox redrive NOTIFICATION_ID` where two services used the same notification id (issue 37),
against a real server: refused with the rows' ids and how to choose, never moving either row; with
--account or --tenant it redrives the one row chosen, as `cancel` chooses it."""

from __future__ import annotations

import json

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from tests.contract.test_redrive_by_id import failed


def run(dsn: DatabaseDsn, *argv: str) -> int:
    return main([argv[0], "--dsn", dsn.url(), *argv[1:]])


def message(tenant: str | None = None) -> str:
    fields = {"to": ["a@example.com"], "subject": "s", "text": "t"}
    return json.dumps(fields | ({"tenant": tenant} if tenant else {}))


def test_redrive_of_a_clashing_notification_id_needs_the_account_or_the_tenant(
    dsn: DatabaseDsn,
    repo: OutboxRepository,
    accounts: dict[str, DatabaseDsn],
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo.tenant_add("news", {"accounts": ["*"]}, "ops", "newsletter")
    other = OutboxRepository.open(accounts["enqueuer"])
    try:
        theirs = other.enqueue_message("dup-1", message()).attempt_id
    finally:
        other.close()
    ours = repo.enqueue_message("dup-1", message("news")).attempt_id
    assert theirs is not None and ours is not None
    failed(repo, theirs)
    failed(repo, ours)
    by = ("--by", "alice", "--reason", "the template was fixed")

    assert run(dsn, "redrive", "dup-1", *by) == 2
    err = capsys.readouterr().err
    assert f"row {theirs} (account '{accounts['enqueuer'].user}', tenant 'default')" in err
    assert f"row {ours} (account '{dsn.user}', tenant 'news')" in err
    assert "--account or --tenant" in err and len(err.strip().splitlines()) == 1
    assert {repo.get_row(theirs).status, repo.get_row(ours).status} == {Status.FAILED}, "neither moved"

    assert run(dsn, "redrive", "dup-1", "--tenant", "news", *by) == 0
    assert f"redrove email {ours} (dup-1)" in capsys.readouterr().out
    assert repo.get_row(ours).status is Status.PENDING
    assert repo.get_row(theirs).status is Status.FAILED, "the other service's row stayed"

    assert run(dsn, "redrive", "dup-1", "--account", "nobody", *by) == 1, "no such row"
    assert run(dsn, "redrive", "dup-1", "--account", accounts["enqueuer"].user, *by) == 0
    assert f"redrove email {theirs} (dup-1)" in capsys.readouterr().out
    assert repo.get_row(theirs).status is Status.PENDING
    assert run(dsn, "redrive", "dup-1", "--tenant", "news", *by) == 1, "not Failed any more"
    assert run(dsn, "redrive", "--id", str(ours), "--tenant", "news", *by) == 2
    assert "--account and --tenant go with a NOTIFICATION_ID" in capsys.readouterr().err

    # cancel chooses the same way
    assert run(dsn, "cancel", "dup-1", *by) == 2
    assert repo.get_row(theirs).status is Status.PENDING and repo.get_row(ours).status is Status.PENDING
    assert run(dsn, "cancel", "dup-1", "--tenant", "default", *by) == 0
    assert repo.get_row(theirs).status is Status.FAILED and repo.get_row(ours).status is Status.PENDING
