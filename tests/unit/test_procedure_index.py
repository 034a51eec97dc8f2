"""docs/procedures.md against procedures/: the index is what the files' headers and parameter lists
say, every public procedure is documented beyond the index, deprecated ones say so, and no public
name carries a version number (docs/procedures.md, "Versions")."""

from __future__ import annotations

import re

from email_outbox.schema.grants import ROLES
from email_outbox_devtools.procedure_index import (
    DEPRECATED,
    DOCS,
    END,
    START,
    header,
    index_table,
    indexed_docs,
    public_procedures,
    result_of,
)

REGENERATE = "python -m email_outbox_devtools.procedure_index --write"


def test_the_index_is_generated_from_the_procedure_files() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    assert docs == indexed_docs(docs), (
        f"the index in docs/procedures.md differs from the headers and parameters in procedures/: run {REGENERATE}"
    )
    assert index_table() in docs


def test_every_public_header_says_what_it_does_and_returns() -> None:
    for procedure in public_procedures():
        text = header(procedure)
        assert text, f"procedures/{procedure.name}.sql has no header comment (its reference text)"
        assert result_of(text), f"procedures/{procedure.name}.sql: its header must say `Result: ...`"


def test_every_public_procedure_is_documented_beyond_the_index() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    body = docs[: docs.index(START)] + docs[docs.index(END) :]
    for procedure in public_procedures():
        assert f"`{procedure.name}" in body, (
            f"docs/procedures.md says nothing about {procedure.name} but its index row"
        )


def test_deprecated_procedures_are_marked_and_named_in_the_versions_table() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    versions = docs[docs.index("## Versions") :]
    versions = versions[: versions.index("\n## ", 1)]
    for procedure in public_procedures():
        deprecated = header(procedure).startswith(DEPRECATED)
        listed = re.search(rf"^\| `{procedure.name}\(", versions, re.MULTILINE) is not None
        assert deprecated == listed, (
            f"{procedure.name}: a header starting {DEPRECATED!r} and a row in the Versions table go together"
        )


def test_no_public_name_carries_a_version_number_but_a_deprecated_one() -> None:
    for procedure in public_procedures():
        if re.search(r"_v\d+$", procedure.name):
            assert header(procedure).startswith(DEPRECATED), f"{procedure.name}: no public *_vN name"


def test_every_public_procedure_is_granted_to_some_role() -> None:
    granted = {name for procedures in ROLES.values() for name in procedures}
    for procedure in public_procedures():
        assert procedure.name in granted, f"{procedure.name} is public but no role of grants.py may call it"
