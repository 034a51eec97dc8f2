"""The generator's constant folding (email_outbox_devtools.sql_fold): what a fragment given a literal
becomes, and what it must leave as written because its value is not certain."""

from __future__ import annotations

import pytest

from email_outbox_devtools.sql_fold import fold


@pytest.mark.parametrize(
    ("written", "folded"),
    [
        ("SET x = IF('Sent' = 'Sent', p_a, a.b);", "SET x = p_a;"),
        ("SET x = IF('Sent' <> 'Sent', 1, v + 1);", "SET x = (v + 1);"),
        ("SET x = IF(NULL IS NULL, v_now, a.claimed_at);", "SET x = v_now;"),
        ("SET x = IF(NULL = NULL, 1, 2);", "SET x = 2;"),
        ("SET x = CASE 'Sent' WHEN 'Released' THEN a WHEN 'Sent' THEN b ELSE c END;", "SET x = b;"),
        ("SET x = CASE 'Sent' WHEN 'Released' THEN a ELSE c + 1 END;", "SET x = (c + 1);"),
        (
            "SET x = CASE WHEN 'Sent' = 'Failed' THEN 1 WHEN p > 0 THEN 2 ELSE 3 END;",
            "SET x = CASE WHEN p > 0 THEN 2 ELSE 3 END;",
        ),
        (
            "SET x = CASE WHEN p > 0 THEN 1 WHEN 'a' = 'a' THEN 2 WHEN q THEN 3 END;",
            "SET x = CASE WHEN p > 0 THEN 1 ELSE 2 END;",
        ),
        (
            "SET x = CASE WHEN 'Sent' = 'Sent' AND (p IS NULL) THEN 1 END;",
            "SET x = CASE WHEN (p IS NULL) THEN 1 END;",
        ),
        ("SET x = COALESCE(NULL, a.claimed_by);", "SET x = a.claimed_by;"),
        ("SET x = COALESCE(0, p);", "SET x = 0;"),
        ("SET x = COALESCE(p, NULL, q);", "SET x = COALESCE(p, q);"),
        ("SET x = LEFT(NULL, 8000);", "SET x = NULL;"),
        ("SET x = IF('Sent' IN ('Failed', 'Retrying'), 1, 0);", "SET x = 0;"),
        ("SET x = IF('Sent' NOT IN ('Failed', 'Retrying'), 1, 0);", "SET x = 1;"),
        ("SET x = IF(NOT ('Sent' = 'Failed'), 1, 0);", "SET x = 1;"),
        ("SET x = IF(2 < 1, 1, 0);", "SET x = 0;"),
        (
            "UPDATE t a SET a.x = 1, a.y = a.y, a.z = 2 WHERE a.id = p AND (NULL IS NULL OR a.l <= NULL);",
            "UPDATE t a SET a.x = 1, a.z = 2 WHERE a.id = p;",
        ),
        ("UPDATE t a SET a.x = 1, a.y = a.y WHERE a.id = p;", "UPDATE t a SET a.x = 1 WHERE a.id = p;"),
        ("IF 'Sent' IN ('Sent') THEN\n  SET x = 1;\nELSE\n  SET x = 2;\nEND IF;", "SET x = 1;"),
        ("IF 'Sent' = 'Failed' THEN\n  SET x = 1;\nELSE\n  SET x = 2;\nEND IF;", "SET x = 2;"),
        (
            "SET y = 0;\nIF 'Sent' = 'Failed' THEN\n  SET x = 1;\nEND IF;\nSET z = 0;",
            "SET y = 0;\nSET z = 0;",
        ),
        (
            "IF p THEN\n  SET x = 1;\nELSEIF 1 = 1 THEN\n  SET x = 2;\nELSE\n  SET x = 3;\nEND IF;",
            "IF p THEN\n  SET x = 1;\nELSE\n  SET x = 2;\nEND IF;",
        ),
    ],
)
def test_a_constant_expression_becomes_its_value(written: str, folded: str) -> None:
    assert fold(written) == folded


@pytest.mark.parametrize(
    "written",
    [
        # Equal under a case-insensitive collation, unequal as bytes: not certain, so left.
        "SET x = IF('Sent' = 'SENT', 1, 0);",
        "SET x = CASE 'Sent' WHEN 'sent' THEN 1 ELSE 0 END;",
        # A string against a number converts by the server's rules: left.
        "SET x = IF('1' = 1, 1, 0);",
        # NOT of NULL is NULL, not true: the branch taken depends on that, so the NULL is kept.
        "SET x = IF(NOT (p = 1 AND NULL = 1), 1, 0);",
        # Nothing constant.
        "SET x = IF(v_outcome = 'Sent', p, a.b);",
        "UPDATE t SET a = a WHERE id = p;",
        # A comparison's operand in parentheses keeps its value's type: never folded inside.
        "SET x = IF((p AND 1 = 1) = 1, 1, 0);",
        # Text in strings and comments is not SQL.
        "SET x = 'IF(1 = 1, a, b)'; -- IF(1 = 1, a, b)",
    ],
)
def test_what_is_not_certain_is_left_as_written(written: str) -> None:
    assert fold(written) == written


def test_a_case_of_literals_tested_for_one_result_is_the_test_of_its_branch() -> None:
    written = "IF CASE CAST(p AS BINARY) WHEN 'Sent' THEN 'Sent' WHEN 'Failed' THEN 'Failed' END = 'Sent' THEN\n  SET x = 1;\nEND IF;"
    assert fold(written) == "IF CAST(p AS BINARY) = 'Sent' THEN\n  SET x = 1;\nEND IF;"
    # Under NOT, a CASE that matches nothing (NULL) and a failed test (FALSE) differ: left.
    negated = "IF NOT (CASE p WHEN 'Sent' THEN 'Sent' END = 'Sent') THEN\n  SET x = 1;\nEND IF;"
    assert fold(negated) == negated
    # As a value, not a test: left.
    value = "SET x = (CASE p WHEN 'Sent' THEN 'Sent' END = 'Sent');"
    assert fold(value) == value


def test_a_refusal_is_tested_by_its_conditions_alone() -> None:
    written = (
        "IF COALESCE(CASE WHEN p < 1 THEN '45001: p' WHEN q IS NULL THEN CONCAT('45001: ', 'q') END,"
        " INSERT(CASE WHEN r < 1 THEN '45001: r' END, 6, 0, ': next')) IS NOT NULL THEN\n  SET x = 1;\nEND IF;"
    )
    assert fold(written) == "IF (p < 1) OR (q IS NULL) OR (r < 1) THEN\n  SET x = 1;\nEND IF;"
    # A result that may be NULL: its CASE is NULL when that branch is taken, so it stays.
    maybe = "IF CASE WHEN p < 1 THEN v END IS NOT NULL THEN\n  SET x = 1;\nEND IF;"
    assert fold(maybe) == maybe
