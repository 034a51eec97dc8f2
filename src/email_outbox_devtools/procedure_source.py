"""procedures/ assembled from procedures/source/: each rule written once, each procedure that runs flat.

A template `procedures/source/<name>.sql` is a procedure file (its header is the reference text) in which
`{{>fragment | name = value | ...}}` stands for `procedures/source/fragments/<fragment>.sql` with its
`{{name}}` placeholders replaced by the values given. A fragment may include others. The generated
`procedures/<name>.sql` is the template with every include expanded, so the server runs plain SQL with no
nested CALL for what the fragments share, and a DBA reads plain procedures. tests/unit/test_procedure_source.py
regenerates every one and compares.

    python -m email_outbox_devtools.procedure_source --write   # rewrite procedures/ from procedures/source/
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from email_outbox_devtools.sql_fold import fold

PROCEDURES = Path(__file__).resolve().parents[2] / "procedures"
SOURCE = PROCEDURES / "source"
FRAGMENTS = SOURCE / "fragments"
REGENERATE = "python -m email_outbox_devtools.procedure_source --write"
NOTICE = f"-- Generated from procedures/source/ (edit there, then run {REGENERATE})."

_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


class SourceError(ValueError):
    """A template or fragment that cannot be expanded: an unknown fragment, a missing or unused value."""


def _fragment_text(name: str) -> str:
    path = FRAGMENTS / f"{name}.sql"
    if not path.is_file():
        raise SourceError(f"no fragment {name} (procedures/source/fragments/{name}.sql)")
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    # The leading comment says what the fragment is for and what its values mean: not copied.
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "\n".join(lines).strip("\n")


def _split_arguments(name: str, text: str) -> dict[str, str]:
    """`| key = value | ...` split at the bars that are not inside a nested include."""
    parts, depth, current = [], 0, []
    index = 0
    while index < len(text):
        pair = text[index : index + 2]
        if pair in ("{{", "}}"):
            depth += 1 if pair == "{{" else -1
            current.append(pair)
            index += 2
            continue
        if text[index] == "|" and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(text[index])
        index += 1
    parts.append("".join(current))
    if parts[0].strip():
        raise SourceError(f"{{{{>{name}}}}}: '{parts[0].strip()}' before the first |")
    values: dict[str, str] = {}
    for part in parts[1:]:
        key, equals, value = part.partition("=")
        if not equals or not key.strip().isidentifier():
            raise SourceError(f"{{{{>{name}}}}}: '{part.strip()}' is not name = value")
        values[key.strip()] = value.strip()
    return values


def _include_at(text: str, start: int) -> tuple[int, str, str]:
    """The include that starts at `start`: where it ends, the fragment's name, its argument text."""
    depth, cursor = 1, start + 3
    while depth:
        if cursor >= len(text):
            raise SourceError(f"an include is not closed: {text[start : start + 60]}")
        pair = text[cursor : cursor + 2]
        if pair in ("{{", "}}"):
            depth += 1 if pair == "{{" else -1
            cursor += 2
        else:
            cursor += 1
    inner = text[start + 3 : cursor - 2]
    name = re.match(r"\s*(\w+)", inner)
    if not name:
        raise SourceError(f"an include names no fragment: {text[start : start + 60]}")
    return cursor, name.group(1), inner[name.end() :]


def _reindent(value: str, column: int) -> str:
    """A value of several lines, its further lines put `column` + 2 spaces in, keeping their shape."""
    first, *rest = value.split("\n")
    if not rest:
        return first
    margin = min((len(line) - len(line.lstrip()) for line in rest if line.strip()), default=0)
    return "\n".join([first] + [" " * (column + 2) + line[margin:] if line.strip() else "" for line in rest])


def _fill(name: str, text: str, values: dict[str, str]) -> str:
    wanted = set(_PLACEHOLDER.findall(text))
    if missing := wanted - values.keys():
        raise SourceError(f"{{{{>{name}}}}} needs {', '.join(sorted(missing))}")
    if unused := values.keys() - wanted:
        raise SourceError(f"{{{{>{name}}}}} has no {', '.join(sorted(unused))}")
    lines = []
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip())

        def value(match: re.Match[str], at: int = indent) -> str:
            return _reindent(values[match.group(1)], at)

        filled = _PLACEHOLDER.sub(value, line)
        if filled.strip() or not line.strip():  # a line that held only an empty value goes
            lines.append(filled)
    return "\n".join(lines)


def expand(text: str, depth: int = 0) -> str:
    """`text` with every include replaced by its fragment, itself expanded."""
    if depth > 20:
        raise SourceError("fragments include each other without end")
    pieces: list[str] = []
    position = 0
    while (start := text.find("{{>", position)) >= 0:
        end, name, arguments = _include_at(text, start)
        body = expand(_fill(name, _fragment_text(name), _split_arguments(name, arguments)), depth + 1)
        pieces.append(text[position:start])
        # A fragment's further lines line up under its first, where the include stood.
        column = len("".join(pieces).rsplit("\n", 1)[-1])
        pieces.append(body.replace("\n", "\n" + " " * column))
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def generated(template: Path) -> str:
    """The procedure file that `template` generates."""
    text = fold(expand(template.read_text(encoding="utf-8")))
    if "\nBEGIN\n" not in text:
        raise SourceError(f"{template.name}: the body must start with a line holding only BEGIN")
    head, _, body = text.partition("\nBEGIN\n")
    return f"{head}\nBEGIN\n  {NOTICE}\n{body.rstrip()}\n"


def templates() -> list[Path]:
    return sorted(SOURCE.glob("*.sql"))


def differences() -> list[str]:
    """The procedure files that differ from what their templates generate, and generated files whose
    template is gone."""
    found = [t.name for t in templates() if (PROCEDURES / t.name).read_text(encoding="utf-8") != generated(t)]
    sources = {t.name for t in templates()}
    found += [
        f"{p.name} (no template)"
        for p in sorted(PROCEDURES.glob("*.sql"))
        if p.name not in sources and NOTICE in p.read_text(encoding="utf-8")
    ]
    return found


def write() -> list[str]:
    written = []
    for template in templates():
        target = PROCEDURES / template.name
        text = generated(template)
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(template.name)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite procedures/ from procedures/source/")
    args = parser.parse_args()
    if args.write:
        for name in write():
            print(f"wrote procedures/{name}")
    else:
        stale = differences()
        for name in stale:
            print(f"differs: procedures/{name}")
        raise SystemExit(1 if stale else 0)


if __name__ == "__main__":
    main()
