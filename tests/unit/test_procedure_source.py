"""procedures/ against procedures/source/: every generated procedure is what its template and the
fragments make (each rule is written once, in a fragment; the procedures that run are flat)."""

from __future__ import annotations

import pytest

from email_outbox_devtools.procedure_source import REGENERATE, SourceError, differences, expand


def test_the_generated_procedures_are_what_their_sources_make() -> None:
    stale = differences()
    assert not stale, f"procedures/ differs from procedures/source/ ({', '.join(stale)}): run {REGENERATE}"


def test_an_include_must_give_every_value_its_fragment_names_and_no_other() -> None:
    with pytest.raises(SourceError, match="needs id"):
        expand("{{>id_refusal}}")
    with pytest.raises(SourceError, match="has no extra"):
        expand("{{>id_refusal | id = p_id | extra = 1}}")
    with pytest.raises(SourceError, match="no fragment nothing_here"):
        expand("{{>nothing_here}}")
    assert expand("{{>id_refusal | id = p_id}}").startswith("WHEN (p_id >= 1) IS NOT TRUE THEN")
