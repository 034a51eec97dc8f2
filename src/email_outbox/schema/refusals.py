"""Which procedure refuses with which errno: the SIGNALs of procedures/ read as data.

docs/procedures.md's Errors table is generated from email_outbox.errors.REFUSALS and this reading
(`python -m email_outbox.schema.refusals` prints it); tests/unit/test_refusals.py checks the table,
and that every SIGNAL sets a MYSQL_ERRNO of the table and every number of the table is signalled.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from email_outbox.errors import REFUSALS, InvalidArgument, InvalidInput, UnsafeText, refusal_name
from email_outbox.procedure_files import ProcedureFile, load_procedures, split_top_level

INTERNAL_PREFIX = "email_internal_"

_SIGNAL = re.compile(
    r"(?<![A-Za-z_])SIGNAL\s+SQLSTATE\s+'(?P<sqlstate>[^']*)'\s*(?:SET\s+MYSQL_ERRNO\s*=\s*(?P<errno>\d+))?",
    re.IGNORECASE,
)
_CALL = re.compile(r"\bCALL\s+`?(?P<name>email_\w+)`?\s*\(", re.IGNORECASE)

# email_internal_check_text checks one text by kind, its last argument: the address rules apply to the
# kinds 'address' and 'mailbox' only, so a CALL passing 'text' cannot raise InvalidAddress.
_NOT_RAISED_FOR_KIND = {("email_internal_check_text", "'text'"): frozenset({45003})}


# The classes nearly every procedure raises (for a limit, an id, a name, a reason): the table says so
# rather than list them all, so a new procedure that only takes such arguments leaves it unchanged.
RAISED_BY_MOST: dict[type[InvalidInput], str] = {
    InvalidArgument: "nearly every procedure (its own arguments' rules, listed under each)",
    UnsafeText: "every procedure that takes a text (notification id, address, subject, name, reason)",
}


@dataclass(frozen=True)
class Signal:
    procedure: str
    line: int
    sqlstate: str
    errno: int | None  # None: no MYSQL_ERRNO, the server's generic 1644


def _code(text: str) -> str:
    """The text with whole-line comments blanked, so line numbers still count."""
    return "\n".join("" if line.lstrip().startswith("--") else line for line in text.split("\n"))


def signals(procedures: Iterable[ProcedureFile]) -> list[Signal]:
    found = []
    for proc in procedures:
        code = _code(proc.text)
        for match in _SIGNAL.finditer(code):
            errno = match.group("errno")
            found.append(
                Signal(
                    proc.name,
                    code.count("\n", 0, match.start()) + 1,
                    match.group("sqlstate"),
                    int(errno) if errno else None,
                )
            )
    return found


def _calls(proc: ProcedureFile) -> list[tuple[str, list[str]]]:
    """The procedures `proc` calls, each with its argument texts."""
    code = _code(proc.text)
    found = []
    for match in _CALL.finditer(code):
        depth, index = 1, match.end()
        while depth and index < len(code):
            depth += {"(": 1, ")": -1}.get(code[index], 0)
            index += 1
        found.append((match.group("name"), split_top_level(code[match.end() : index - 1])))
    return found


def errnos_by_procedure(procedures: list[ProcedureFile] | None = None) -> dict[str, frozenset[int]]:
    """Every errno each procedure can refuse with: its own SIGNALs and those of what it calls."""
    procedures = load_procedures() if procedures is None else procedures
    own: dict[str, set[int]] = {p.name: set() for p in procedures}
    for signal in signals(procedures):
        if signal.errno is not None:
            own[signal.procedure].add(signal.errno)
    calls = {p.name: _calls(p) for p in procedures}
    result: dict[str, frozenset[int]] = {}

    def reach(name: str, visiting: frozenset[str]) -> frozenset[int]:
        if name in result:
            return result[name]
        errnos = set(own.get(name, ()))
        for callee, args in calls.get(name, []):
            if callee in visiting:
                continue
            excluded = _NOT_RAISED_FOR_KIND.get((callee, args[-1] if args else ""), frozenset())
            errnos |= reach(callee, visiting | {name}) - excluded
        result[name] = frozenset(errnos)
        return result[name]

    for name in own:
        reach(name, frozenset())
    return result


def raised_by(procedures: list[ProcedureFile] | None = None) -> dict[int, list[str]]:
    """The public procedures (not email_internal_*) that can refuse with each errno, by name."""
    by_errno: dict[int, list[str]] = {}
    for name, errnos in sorted(errnos_by_procedure(procedures).items()):
        if not name.startswith(INTERNAL_PREFIX):
            for errno in errnos:
                by_errno.setdefault(errno, []).append(name)
    return by_errno


def errors_table(procedures: list[ProcedureFile] | None = None) -> str:
    """docs/procedures.md's Errors table: errno, name, meaning, the public procedures that raise it."""
    callers = raised_by(procedures)
    lines = ["| errno | name | meaning | raised by |", "|---|---|---|---|"]
    for cls in REFUSALS:
        assert cls.errno is not None and cls.__doc__, cls
        meaning = " ".join(cls.__doc__.split("\n\n")[0].split())
        names = RAISED_BY_MOST.get(cls) or ", ".join(f"`{name}`" for name in callers.get(cls.errno, []))
        lines.append(f"| {cls.errno} | `{refusal_name(cls)}` | {meaning} | {names} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(errors_table())
