"""Erasure keys with versions (issue 38, item 6) against a real server: tombstones of notification ids
and suppression entries of erased addresses are HMAC-SHA256 under the newest key of
email_outbox_keys, tagged with its id; a key added by `email-outbox erasure-key rotate` (made by the
server) keys what comes after, while what the older key and the pre-0.2.0 forms keyed still matches;
a guess hashed without the key matches nothing; no migration statement carries a key."""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterator
from datetime import timedelta

import pytest

from email_outbox.cli.main import main
from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository, connect
from email_outbox.errors import AccessDenied
from email_outbox.procedure_files import migrations_dir
from email_outbox.schema.migrate import migrate
from tests.conftest import TestServer, db_now, set_clock
from tests.support.accounts import granted_account
from tests.support.helpers import scalar, token
from tests.support.history import claim, rows

LEGACY_SECRET = bytes(range(32))


def _erased_form(key_id: int, secret: bytes, address: str) -> str:
    digest = hmac.new(secret, b"address:" + address.lower().encode(), hashlib.sha256).hexdigest()
    return f"#{key_id}:{digest}"


def _id_form(secret: bytes, notification_id: str) -> bytes:
    return hmac.new(secret, b"notification_id:" + notification_id.encode(), hashlib.sha256).digest()


def _execute(repo: OutboxRepository, sql: str, args: tuple[object, ...] = ()) -> None:
    cursor = repo.connection.cursor()
    cursor.execute(sql, args)
    repo.connection.commit()
    cursor.close()


def _tombstone(repo: OutboxRepository, notification_id: str) -> None:
    """A Sent email with this id, final 40 days ago, deleted by retention: a tombstone remains."""
    set_clock(repo, db_now(repo) - timedelta(days=40))
    attempt_id = repo.enqueue(notification_id, "ann@example.com", "s", text_body="t").attempt_id
    assert attempt_id is not None and repo.finalize_sent(attempt_id, claim(repo, attempt_id), token()) == 1
    set_clock(repo, None)
    assert repo.retention(30, None, 1000, "retention-test").deleted == 1


def _suppressed_at_enqueue(repo: OutboxRepository, address: str) -> bool:
    attempt_id = repo.enqueue(token(), address, "s", text_body="t").attempt_id
    assert attempt_id is not None
    return (
        scalar(repo, f"SELECT last_error_code FROM email_delivery_attempts WHERE id = {attempt_id}")
        == "Suppressed"
    )


def _suppressed_at_claim(repo: OutboxRepository, address: str, listed_key: str) -> bool:
    """A due row to `address`, then an entry keyed `listed_key` on the list: the batch claim's check."""
    attempt_id = repo.enqueue(token(), address, "s", text_body="t").attempt_id
    assert attempt_id is not None
    _execute(
        repo,
        "INSERT INTO email_suppressed_addresses (address_key, address, reason, detail, added_at, added_by, added_via)"
        " VALUES (%s, '(erased)', 'operator', 'erased: test', UTC_TIMESTAMP(6), 'test', 'test')",
        (listed_key,),
    )
    try:
        claimed = repo.claim_batch(token(), "key-test", 60, 10)
    finally:
        _execute(repo, "DELETE FROM email_suppressed_addresses WHERE address_key = %s", (listed_key,))
    status = scalar(repo, f"SELECT last_error_code FROM email_delivery_attempts WHERE id = {attempt_id}")
    return status == "Suppressed" and all(email.id != attempt_id for email in claimed)


@pytest.fixture
def upgraded(fresh_dsn: DatabaseDsn) -> Iterator[OutboxRepository]:
    """A database as 0.1.0 left it for this item: the 0014 secret (LEGACY_SECRET) in
    email_outbox_secrets, no email_outbox_keys, a plain-SHA-256 tombstone of 'old-plain' and an erased
    address ('old@example.com') in the old '#' + SHA-256 form; then `migrate`."""
    migrate(fresh_dsn)
    conn = connect(fresh_dsn)
    try:
        cur = conn.cursor()
        cur.execute("DROP TABLE email_outbox_keys")
        cur.execute("ALTER TABLE email_notification_tombstones DROP COLUMN key_id")
        cur.execute("DELETE FROM _yoyo_migration WHERE migration_id = '0018_erasure_keys'")
        cur.execute(
            "INSERT INTO email_outbox_secrets (name, secret, created_at) VALUES ('erasure', %s, UTC_TIMESTAMP(6))",
            (LEGACY_SECRET,),
        )
        cur.execute(
            "INSERT INTO email_notification_tombstones (account, id_hash, deleted_on, keep_until)"
            " VALUES ('', UNHEX(SHA2('old-plain', 256)), UTC_DATE(), UTC_DATE() + INTERVAL 10 DAY)"
        )
        legacy = "#" + hashlib.sha256(LEGACY_SECRET.hex().upper().encode() + b":old@example.com").hexdigest()
        cur.execute(
            "INSERT INTO email_suppressed_addresses (address_key, address, reason, detail, added_at, added_by, added_via)"
            " VALUES (%s, '(erased)', 'operator', 'erased: before', UTC_TIMESTAMP(6), 'test', 'test')",
            (legacy,),
        )
        conn.commit()
    finally:
        conn.close()
    migrate(fresh_dsn)
    repo = OutboxRepository.open(fresh_dsn)
    yield repo
    repo.close()


def _keys(repo: OutboxRepository) -> list[tuple[int, bytes, int]]:
    return [
        (int(i), bytes(s), int(legacy))
        for i, s, legacy in rows(repo, "SELECT id, secret, legacy FROM email_outbox_keys ORDER BY id")
    ]


def test_what_an_older_key_keyed_still_matches_after_a_rotation_and_new_entries_use_the_new_key(
    upgraded: OutboxRepository, fresh_dsn: DatabaseDsn, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = upgraded
    assert _keys(repo) == [(1, LEGACY_SECRET, 1)], "the 0014 secret, moved by the server"
    # Before the rotation: a keyed tombstone and an erased address under key 1.
    _tombstone(repo, "welcome:ann@example.com")
    assert rows(
        repo, "SELECT key_id, id_hash FROM email_notification_tombstones WHERE key_id IS NOT NULL"
    ) == [(1, _id_form(LEGACY_SECRET, "welcome:ann@example.com"))]
    assert repo.suppression_add("bob@example.com", "ops", "asked not to be mailed") == 1
    assert repo.erase_address("bob@example.com", "dpo", "GDPR-1").erased == 0
    assert scalar(repo, "SELECT address_hash FROM email_erasures") == _erased_form(
        1, LEGACY_SECRET, "bob@example.com"
    )

    assert (
        main(["erasure-key", "rotate", "--dsn", fresh_dsn.url(), "--by", "ops", "--reason", "backup lost"])
        == 0
    )
    assert "erasure key 2" in capsys.readouterr().out
    (_, _, _), (new_id, new_secret, new_legacy) = _keys(repo)
    assert (new_id, new_legacy) == (2, 0)
    assert new_secret != LEGACY_SECRET and len(new_secret) == 32

    # A new tombstone uses key 2 (first: retention stops at the first young row by id).
    _tombstone(repo, "welcome:carl@example.com")
    assert rows(repo, "SELECT key_id, id_hash FROM email_notification_tombstones WHERE key_id = 2") == [
        (2, _id_form(new_secret, "welcome:carl@example.com"))
    ]
    # Everything keyed before still answers: both tombstones, both erased addresses (any case).
    for notification_id in ("welcome:ann@example.com", "old-plain"):
        assert repo.enqueue(notification_id, "ann@example.com", "s", text_body="t").attempt_id is None
    assert _suppressed_at_enqueue(repo, "Bob@Example.com")
    assert _suppressed_at_enqueue(repo, "old@example.com")
    assert repo.suppression_add("bob@example.com", "ops", "again") == 0, "already suppressed, kept keyed"

    # New ones use key 2.
    repo.suppression_add("dan@example.com", "ops", "asked not to be mailed")
    repo.erase_address("dan@example.com", "dpo", "GDPR-2")
    assert scalar(repo, "SELECT address_hash FROM email_erasures ORDER BY id DESC LIMIT 1") == _erased_form(
        2, new_secret, "dan@example.com"
    )
    assert _suppressed_at_enqueue(repo, "dan@example.com")
    # An erased address removed from the list under the old key is no longer suppressed.
    assert repo.suppression_remove("old@example.com", "ops", "asked to be mailed again") == 1
    assert not _suppressed_at_enqueue(repo, "old@example.com")


def test_the_batch_claim_finds_an_erased_address_under_each_key_held(upgraded: OutboxRepository) -> None:
    repo = upgraded
    repo.rotate_erasure_key("ops", "test")
    (_, old, _), (_, new, _) = _keys(repo)
    legacy = "#" + hashlib.sha256(LEGACY_SECRET.hex().upper().encode() + b":eve@example.com").hexdigest()
    for listed in (_erased_form(1, old, "eve@example.com"), _erased_form(2, new, "eve@example.com"), legacy):
        assert _suppressed_at_claim(repo, "Eve@example.COM", listed), listed
    # A key the outbox does not hold (a guess of the form without the secret) matches nothing.
    guessed = "#2:" + hashlib.sha256(b"address:eve@example.com").hexdigest()
    assert not _suppressed_at_claim(repo, "eve@example.com", guessed)


def test_a_guess_hashed_without_the_key_matches_no_tombstone_or_entry(repo: OutboxRepository) -> None:
    _tombstone(repo, "welcome:fay@example.com")
    (id_hash,) = [bytes(r[0]) for r in rows(repo, "SELECT id_hash FROM email_notification_tombstones")]
    assert id_hash != hashlib.sha256(b"welcome:fay@example.com").digest()
    assert id_hash != hashlib.sha256(b"notification_id:welcome:fay@example.com").digest()
    repo.suppression_add("fay@example.com", "ops", "asked not to be mailed")
    repo.erase_address("fay@example.com", "dpo", "GDPR-3")
    listed = str(scalar(repo, "SELECT address_key FROM email_suppressed_addresses"))
    digest = listed.split(":", 1)[1]
    assert digest not in (
        hashlib.sha256(b"address:fay@example.com").hexdigest(),
        hashlib.sha256(b"fay@example.com").hexdigest(),
    )


def test_no_migration_statement_carries_a_key(fresh_dsn: DatabaseDsn) -> None:
    """The first key is made by the server: neither its bytes nor their hex are in any statement the
    migrations send (the server's general log of the migrating session) nor in a migration's text."""
    conn = connect(fresh_dsn)
    cur = conn.cursor()
    cur.execute("SELECT @@general_log, @@log_output")
    before = cur.fetchone()
    assert before is not None
    try:
        cur.execute("SET GLOBAL log_output = 'TABLE'")
        cur.execute("TRUNCATE mysql.general_log")
        cur.execute("SET GLOBAL general_log = 1")
    except Exception as exc:  # an account without SUPER cannot switch the general log on
        conn.close()
        pytest.skip(f"SKIP: the general log cannot be switched on here: {exc}")
    try:
        migrate(fresh_dsn)
        cur.execute("SET GLOBAL general_log = 0")
        cur.execute("SELECT argument FROM mysql.general_log WHERE command_type = 'Query'")
        statements = [bytes(a) if not isinstance(a, str) else a.encode() for (a,) in cur.fetchall()]
    finally:
        cur.execute("SET GLOBAL general_log = 0")
        cur.execute(f"SET GLOBAL log_output = '{before[1]}'")
        cur.execute(f"SET GLOBAL general_log = {int(before[0])}")
        cur.execute("TRUNCATE mysql.general_log")
        conn.close()
    repo = OutboxRepository.open(fresh_dsn)
    try:
        (secret,) = [bytes(r[0]) for r in rows(repo, "SELECT secret FROM email_outbox_keys")]
    finally:
        repo.close()
    assert any(b"RANDOM_BYTES" in s for s in statements), "the migration was logged"
    for form in (secret, secret.hex().encode(), secret.hex().upper().encode()):
        assert not any(form in s for s in statements)
    # Nor can a migration's text hold one: no 32-byte literal (64 hex digits) in any of them.
    texts = {path.name: path.read_text() for path in migrations_dir().glob("*.py")}
    assert "0018_erasure_keys.py" in texts
    assert [name for name, text in texts.items() if re.search(r"[0-9a-fA-F]{64}", text)] == []


@pytest.mark.parametrize(("role", "may"), [("operator", True), ("maintenance", False), ("viewer", False)])
def test_only_operators_may_rotate_and_no_role_reads_the_keys(
    server: TestServer, fresh_dsn: DatabaseDsn, role: str, may: bool
) -> None:
    migrate(fresh_dsn)
    with granted_account(server, fresh_dsn, role) as account:
        granted = OutboxRepository.open(account)
        try:
            if may:
                assert granted.rotate_erasure_key("ops", "test") == (2, 2)
            else:
                with pytest.raises(AccessDenied):
                    granted.rotate_erasure_key("ops", "test")
            with pytest.raises(Exception, match="denied"):
                granted._select("SELECT secret FROM email_outbox_keys")
        finally:
            granted.close()
