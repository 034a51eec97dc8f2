"""The procedure index of docs/procedures.md, generated from procedures/: each public procedure's name
and parameters as its file declares them, what it does (the first sentence of its header comment) and
its result (the header's `Result:` sentence). tests/unit/test_procedure_index.py checks that the
docs show exactly this, so the reference cannot drift from the files.

    python -m email_outbox_devtools.procedure_index --write   # rewrite the index in docs/procedures.md
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from email_outbox.procedure_files import ProcedureFile, load_procedures

DOCS = Path(__file__).resolve().parents[2] / "docs" / "procedures.md"
START = "<!-- index:start (generated from procedures/ by python -m email_outbox_devtools.procedure_index --write) -->"
END = "<!-- index:end -->"
INTERNAL_PREFIX = "email_internal_"
DEPRECATED = "Deprecated:"


def header(procedure: ProcedureFile) -> str:
    """The comment lines above CREATE PROCEDURE, joined into one paragraph."""
    lines = []
    for line in procedure.text.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line.removeprefix("--").strip())
    return " ".join(line for line in lines if line)


def first_sentence(text: str) -> str:
    """Up to the first full stop that ends a sentence (followed by a space, or the end)."""
    match = re.search(r"\.(?=\s|$)", text)
    return text[: match.start() + 1] if match else text


def result_of(text: str) -> str:
    """The header's `Result: ...` sentence, without the word and the final full stop."""
    match = re.search(r"\bResult: (.*)", text)
    if not match:
        return ""
    return first_sentence(match.group(1)).removesuffix(".")


def public_procedures() -> list[ProcedureFile]:
    return [p for p in load_procedures() if not p.name.startswith(INTERNAL_PREFIX)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def index_table() -> str:
    rows = [
        "| procedure | what it does | result |",
        "|---|---|---|",
    ]
    for procedure in public_procedures():
        text = header(procedure)
        parameters = ", ".join(p.name.removeprefix("p_") for p in procedure.parameters)
        rows.append(
            f"| `{procedure.name}({parameters})` | {_cell(first_sentence(text))} | {_cell(result_of(text))} |"
        )
    return "\n".join(rows) + "\n"


def indexed_docs(docs: str) -> str:
    """`docs` with the text between the index markers replaced by the generated index."""
    before, _, rest = docs.partition(START)
    _, found, after = rest.partition(END)
    if not found:
        raise ValueError(f"docs/procedures.md has no {START} ... {END} section")
    return f"{before}{START}\n{index_table()}{END}{after}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help="rewrite the index in docs/procedures.md")
    args = parser.parse_args()
    if args.write:
        DOCS.write_text(indexed_docs(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        print(index_table(), end="")


if __name__ == "__main__":
    main()
