"""The errno table: one declaration (email_outbox.errors.REFUSALS), every SIGNAL in procedures/ tied to
it, docs/procedures.md's Errors table generated from it, and the driver's error translated to its class.
Reads files only; the same refusals through CALL on a real server are in tests/contract/test_refusals.py.
"""

from __future__ import annotations

from pathlib import Path

import mysql.connector
import pytest

from email_outbox.db.connection import translate_error
from email_outbox.errors import REFUSAL_BY_ERRNO, REFUSALS, InvalidInput, refusal_name
from email_outbox.procedure_files import load_procedures
from email_outbox.schema.refusals import errors_table, raised_by, signals

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "regenerate it: python -m email_outbox.schema.refusals, pasted over the table"


def test_every_signal_in_procedures_carries_a_number_of_the_table() -> None:
    found = signals(load_procedures())
    assert len(found) > 50, "the parser must see the procedures' SIGNALs"
    wrong = [
        f"procedures/{s.procedure}.sql:{s.line}: SQLSTATE '{s.sqlstate}', MYSQL_ERRNO {s.errno}"
        for s in found
        if s.sqlstate != "45000" or s.errno not in REFUSAL_BY_ERRNO
    ]
    assert not wrong, (
        "every SIGNAL is SQLSTATE '45000' SET MYSQL_ERRNO = <a number of errors.REFUSALS>, MESSAGE_TEXT = ...;"
        " (docs/procedures.md, Errors):\n" + "\n".join(wrong)
    )


def test_the_table_lists_no_number_that_nothing_raises() -> None:
    signalled = {s.errno for s in signals(load_procedures())}
    unused = [f"{cls.errno} {cls.__name__}" for cls in REFUSALS if cls.errno not in signalled]
    assert not unused, f"errors.REFUSALS lists numbers no SIGNAL in procedures/ uses: {unused}"


def test_the_numbers_are_one_per_class_and_outside_the_servers_ranges() -> None:
    numbers = [cls.errno for cls in REFUSALS]
    assert len(set(numbers)) == len(numbers) == len(REFUSAL_BY_ERRNO), numbers
    assert numbers == sorted(numbers), "REFUSALS is the table, in number order"
    for cls in REFUSALS:
        assert issubclass(cls, InvalidInput), cls
        assert cls.errno is not None and 45001 <= cls.errno <= 45999, cls
        assert cls.__doc__, f"{cls.__name__} needs its meaning as docstring"
    assert len({refusal_name(cls) for cls in REFUSALS}) == len(REFUSALS)
    assert refusal_name(REFUSAL_BY_ERRNO[45003]) == "invalid_address"


def test_the_docs_show_the_generated_errors_table() -> None:
    docs = (ROOT / "docs" / "procedures.md").read_text(encoding="utf-8")
    assert "\n## Errors\n" in docs
    assert errors_table() + "\n" in docs, f"docs/procedures.md's Errors table is stale: {REGENERATE}"


def test_raised_by_follows_calls_into_the_shared_checks() -> None:
    by_errno = raised_by()
    # email_internal_check_sender, reached through email_internal_enqueue.
    assert by_errno[45005] == ["email_enqueue", "email_enqueue_message"]
    # the claim token's rule (fragments/token_refusal.sql), assembled into every call that names a claim.
    assert "email_finalize_sent" in by_errno[45007]
    # email_internal_check_text refuses an address only for the kinds that are one.
    assert "email_try_claim" in by_errno[45010] and "email_try_claim" not in by_errno[45003]
    assert "email_suppression_add" in by_errno[45003]
    assert not any(name.startswith("email_internal_") for names in by_errno.values() for name in names)


@pytest.mark.parametrize("cls", REFUSALS, ids=lambda cls: cls.__name__)
def test_the_driver_error_becomes_the_class_of_its_number(cls: type[InvalidInput]) -> None:
    error = mysql.connector.DatabaseError(msg="email_x: rule", errno=cls.errno, sqlstate="45000")
    translated = translate_error(error)
    assert type(translated) is cls and isinstance(translated, InvalidInput)
    assert translated.errno == cls.errno and str(translated) == "email_x: rule"


def test_a_45000_without_a_number_of_the_table_stays_invalid_input() -> None:
    for errno in (1644, 45999):
        translated = translate_error(mysql.connector.DatabaseError(msg="m", errno=errno, sqlstate="45000"))
        assert type(translated) is InvalidInput and translated.errno is None
