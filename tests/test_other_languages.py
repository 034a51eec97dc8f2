"""The contract from a client with no Python driver: plain CALL text through the mariadb/mysql CLI."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from email_outbox.dsn import DatabaseDsn
from email_outbox.models import Status
from email_outbox.repository import OutboxRepository


def _client() -> str:
    for name in ("mariadb", "mysql"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "neither the mariadb nor the mysql command-line client is installed (apt-get install mariadb-client)"
    )


def sql(dsn: DatabaseDsn, statements: str) -> list[list[str]]:
    """Run statements in one client session; return the rows of every result set (tab-separated, no headers)."""
    cmd = [_client(), "--batch", "--skip-column-names", f"--user={dsn.user}", dsn.database]
    if dsn.password:
        cmd.insert(1, f"--password={dsn.password}")
    cmd += (
        [f"--socket={dsn.unix_socket}"]
        if dsn.unix_socket
        else [f"--host={dsn.host}", f"--port={dsn.port}", "--protocol=TCP"]
    )
    out = subprocess.run(cmd, input=statements, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(out.stderr)
    return [line.split("\t") for line in out.stdout.splitlines()]


def test_enqueue_claim_finalize_requeue_through_the_cli(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    rows = sql(
        dsn,
        """
        START TRANSACTION;
        CALL email_enqueue('cli-1', 'a@example.com', NULL, 'From another language', 'body', NULL, 3, NULL);
        CALL email_enqueue('cli-1', 'a@example.com', NULL, 'From another language', 'body', NULL, 3, NULL);
        COMMIT;
        CALL email_enqueue('cli-2', 'b@example.com', 'shop@example.com', 'Second', NULL, '<p>x</p>', NULL, NULL);
    """,
    )
    (first_affected, first_id), (dup_affected, dup_id), (second_affected, second_id) = rows
    assert (first_affected, dup_affected, second_affected) == ("1", "0", "1")
    assert dup_id == first_id

    claimed = sql(dsn, "CALL email_claim_batch('tok-cli', 'go-service-1', 60, 10);")
    assert [r[0] for r in claimed] == [first_id, second_id]
    assert claimed[0][1:5] == ["cli-1", "a@example.com", "NULL", "From another language"]

    (sent,) = sql(dsn, f"CALL email_finalize_sent({first_id}, 'tok-cli', 'ses-123');")
    (stale,) = sql(dsn, f"CALL email_finalize_sent({first_id}, 'someone-else', 'ses-999');")
    (unknown,) = sql(dsn, f"CALL email_finalize_unknown({second_id}, 'tok-cli', 'read timeout');")
    (requeued,) = sql(dsn, f"CALL email_requeue_unknown_outcome({second_id}, 'dba-alice', 'not in SES');")
    assert (sent, stale, unknown, requeued) == (["1"], ["0"], ["1"], ["1"])

    assert repo.get_row(int(first_id)).status is Status.SENT
    assert repo.get_row(int(first_id)).provider_message_id == "ses-123"
    assert repo.get_row(int(second_id)).status is Status.PENDING
    assert repo.events(int(second_id))[-1].actor == "dba-alice"

    stats = {r[0]: int(r[1]) for r in sql(dsn, "CALL email_outbox_stats();")}
    assert stats == {
        "Pending": 1,
        "Retrying": 0,
        "Processing": 0,
        "Sent": 1,
        "Failed": 0,
        "UnknownOutcome": 0,
    }


def test_cli_sees_the_typed_error(dsn: DatabaseDsn) -> None:
    with pytest.raises(AssertionError, match=r"ERROR 1644 \(45000\).*email_enqueue: to_address"):
        sql(dsn, "CALL email_enqueue('bad', 'not-an-address', NULL, 's', 'b', NULL, NULL, NULL);")
