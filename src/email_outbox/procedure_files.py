"""The SQL that ships with the project, as files: where procedures/ and db/migrations/ are, and each
procedure file read (its name, parameters and body). The repository (db/) reads the parameter names
it calls with; the schema (schema/) installs and compares the files.

In a source checkout (the editable install `make` uses) the folders sit beside src/; a wheel install
carries copies under <prefix>/share/email-outbox/. EMAIL_OUTBOX_HOME overrides both. Each file holds
exactly one `CREATE PROCEDURE` (no DELIMITER).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[2]


def _locate(relative_in_repo: str, shared_name: str) -> Path:
    override = os.environ.get("EMAIL_OUTBOX_HOME")
    candidates = []
    if override:
        candidates.append(Path(override) / relative_in_repo)
    candidates += [_REPO_ROOT / relative_in_repo, Path(sys.prefix) / "share" / "email-outbox" / shared_name]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"cannot find {relative_in_repo} (looked in {', '.join(map(str, candidates))})")


def procedures_dir() -> Path:
    return _locate("procedures", "procedures")


def migrations_dir() -> Path:
    return _locate("db/migrations", "migrations")


HEADER = re.compile(r"\bCREATE\s+PROCEDURE\s+`?(\w+)`?\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class Parameter:
    mode: str
    name: str
    data_type: str


@dataclass(frozen=True)
class ProcedureFile:
    name: str
    parameters: tuple[Parameter, ...]
    body: str
    text: str
    path: Path


def split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if "".join(current).strip():
        parts.append("".join(current))
    return [p.strip() for p in parts]


def parse_procedure(path: Path) -> ProcedureFile:
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n")
    match = HEADER.search(text)
    if not match:
        raise ValueError(f"{path}: no CREATE PROCEDURE")
    if len(HEADER.findall(text)) != 1:
        raise ValueError(f"{path}: exactly one CREATE PROCEDURE per file")
    name = match.group(1)
    if name != path.stem:
        raise ValueError(f"{path}: file name must be the procedure name ({name})")
    start = match.end()
    depth, index = 1, start
    while depth:
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
        index += 1
    params = []
    for raw in split_top_level(text[start : index - 1]):
        words = raw.split()
        if words[0].upper() not in ("IN", "OUT", "INOUT"):
            raise ValueError(f"{path}: parameter '{raw}' must start with IN, OUT or INOUT")
        params.append(Parameter(words[0].upper(), words[1], re.split(r"[\s(]", words[2])[0].lower()))
    body_match = re.search(r"^BEGIN$", text[index:], re.MULTILINE)
    if not body_match:
        raise ValueError(f"{path}: the body must start with a line holding only BEGIN")
    body = text[index + body_match.start() :].strip()
    return ProcedureFile(name, tuple(params), body, text, path)


@functools.cache
def parameter_names(procedure: str) -> tuple[str, ...]:
    """The parameters of `procedure` as its file declares them, in order, without the `p_` prefix."""
    path = procedures_dir() / f"{procedure}.sql"
    return tuple(p.name.removeprefix("p_") for p in parse_procedure(path).parameters)


def load_procedures(directory: Path | None = None) -> list[ProcedureFile]:
    directory = directory or procedures_dir()
    return [parse_procedure(path) for path in sorted(directory.glob("*.sql"))]
