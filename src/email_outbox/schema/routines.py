"""procedures/*.sql as the single source of truth: parse, install, and detect drift.

Each file holds exactly one `CREATE PROCEDURE` (no DELIMITER) and is sent to the server whole, in one
execute, so no client-side statement splitter ever sees a procedure body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from email_outbox.procedure_files import HEADER, Parameter, ProcedureFile, load_procedures

# Procedures keep the sql_mode and character set in force when they were created. Install with known
# ones, so a server's or a DBA's session settings never change how the contract behaves.
INSTALL_SQL_MODE = (
    "STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
)


class Cursor(Protocol):
    def execute(self, operation: str, params: Any = ...) -> Any: ...
    def fetchall(self) -> Any: ...


@dataclass
class DriftReport:
    missing: list[str] = field(default_factory=list)
    changed: dict[str, str] = field(default_factory=dict)
    # Installed email_* procedures with no file: kept on purpose for one release after a rename.
    extra: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.missing and not self.changed

    def describe(self) -> str:
        if self.clean:
            return "installed procedures match procedures/"
        lines = [f"missing: {name}" for name in self.missing]
        lines += [f"differs: {name} ({why})" for name, why in sorted(self.changed.items())]
        return "; ".join(lines)


def _is_mariadb(cursor: Cursor) -> bool:
    cursor.execute("SELECT VERSION()")
    return "mariadb" in str(cursor.fetchall()[0][0]).lower()


def _installed(cursor: Cursor) -> dict[str, tuple[str, str]]:
    cursor.execute(
        "SELECT ROUTINE_NAME, ROUTINE_DEFINITION, SQL_MODE FROM information_schema.ROUTINES"
        " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND ROUTINE_NAME LIKE 'email\\_%%'"
    )
    return {
        str(n): (str(d or "").replace("\r\n", "\n").strip(), str(m or "")) for n, d, m in cursor.fetchall()
    }


def _installed_parameters(cursor: Cursor) -> dict[str, tuple[Parameter, ...]]:
    cursor.execute(
        "SELECT SPECIFIC_NAME, PARAMETER_MODE, PARAMETER_NAME, DATA_TYPE FROM information_schema.PARAMETERS"
        " WHERE SPECIFIC_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE' AND PARAMETER_MODE IS NOT NULL"
        " ORDER BY SPECIFIC_NAME, ORDINAL_POSITION"
    )
    result: dict[str, list[Parameter]] = {}
    for name, mode, pname, dtype in cursor.fetchall():
        result.setdefault(str(name), []).append(Parameter(str(mode).upper(), str(pname), str(dtype).lower()))
    return {k: tuple(v) for k, v in result.items()}


def _difference(
    proc: ProcedureFile,
    installed: dict[str, tuple[str, str]],
    parameters: dict[str, tuple[Parameter, ...]],
) -> str | None:
    if proc.name not in installed:
        return "missing"
    body, sql_mode = installed[proc.name]
    # An account with EXECUTE only (the worker role) sees the routine but not its definition: the
    # body cannot be compared then, and an empty one is no evidence of drift.
    if body and body != proc.body:
        return "body"
    if parameters.get(proc.name, ()) != proc.parameters:
        return "parameters"
    if set(sql_mode.split(",")) != set(INSTALL_SQL_MODE.split(",")):
        return f"sql_mode {sql_mode}"
    return None


def check_drift(
    cursor: Cursor, directory: Path | None = None, *, only: Collection[str] | None = None
) -> DriftReport:
    """Compare installed routines with procedures/: names, parameter lists and bodies.

    `only` limits the check to the procedures a caller uses: a least-privilege account sees only the
    routines it may execute, so the rest would look missing.
    """
    procedures = [p for p in load_procedures(directory) if only is None or p.name in only]
    installed = _installed(cursor)
    parameters = _installed_parameters(cursor)
    report = DriftReport()
    for proc in procedures:
        why = _difference(proc, installed, parameters)
        if why == "missing":
            report.missing.append(proc.name)
        elif why:
            report.changed[proc.name] = why
    known = {p.name for p in load_procedures(directory)}
    report.extra = sorted(n for n in installed if n not in known)
    return report


def sync_procedures(
    cursor: Cursor, directory: Path | None = None, *, only: Collection[str] | None = None
) -> list[str]:
    """Install every procedure whose definition differs from its file (of those named in `only`, when
    given). Returns the names installed.

    MariaDB replaces a routine atomically (CREATE OR REPLACE), so a concurrent CALL never finds it
    missing. MySQL 8 has no CREATE OR REPLACE PROCEDURE: DROP + CREATE, and callers retry error 1305
    for a moment. An unchanged procedure is never touched on either server.
    """
    procedures = [p for p in load_procedures(directory) if only is None or p.name in only]
    if not procedures:
        return []
    installed = _installed(cursor)
    parameters = _installed_parameters(cursor)
    mariadb = _is_mariadb(cursor)
    cursor.execute("SELECT @@SESSION.sql_mode")
    previous_mode = cursor.fetchall()[0][0]
    cursor.execute("SET SESSION sql_mode = %s", (INSTALL_SQL_MODE,))
    cursor.execute("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci")
    changed = []
    try:
        for proc in procedures:
            if _difference(proc, installed, parameters) is None:
                continue
            if mariadb:
                cursor.execute(
                    HEADER.sub(lambda m: f"CREATE OR REPLACE PROCEDURE {m.group(1)}(", proc.text, 1)
                )
            else:
                cursor.execute(f"DROP PROCEDURE IF EXISTS {proc.name}")
                cursor.execute(proc.text)
            changed.append(proc.name)
    finally:
        cursor.execute("SET SESSION sql_mode = %s", (previous_mode,))
    return changed


def retire_procedures(cursor: Cursor, names: Collection[str]) -> None:
    """A migration's step that drops procedures no file defines any more (docs/procedures.md,
    "Versions"). The installed procedures that still call one are replaced by their files first, so
    nothing installed calls a retired procedure when it goes and a running caller never meets a
    missing one. Idempotent: a procedure already dropped is no error."""
    known = {p.name for p in load_procedures()}
    for name in names:
        if name in known:
            raise ValueError(f"{name} still has a file in procedures/: remove it before retiring it")
    replace_installed_naming(cursor, names)
    for name in names:
        cursor.execute(f"DROP PROCEDURE IF EXISTS {name}")


def replace_installed_naming(cursor: Cursor, names: Collection[str]) -> list[str]:
    """Replace by its file every installed procedure (not itself one of `names`) whose body names one
    of `names` (a procedure, an index): a migration does this before it drops what they name, so
    nothing installed refers to it once it is gone. Returns the names installed."""
    known = {p.name for p in load_procedures()}
    callers = {
        caller
        for caller, (body, _mode) in _installed(cursor).items()
        if caller not in names and any(re.search(rf"\b{name}\b", body) for name in names)
    }
    return sync_procedures(cursor, only=callers & known)


def sync_procedures_step(conn: Any) -> None:
    """The yoyo post-apply step: called with yoyo's DB-API connection."""
    cursor = conn.cursor()
    try:
        sync_procedures(cursor)
    finally:
        cursor.close()


def retire_step(names: Collection[str]) -> Callable[[Any], None]:
    """A migration's yoyo step (called with yoyo's DB-API connection) that retires `names`
    (retire_procedures)."""

    def retire(conn: Any) -> None:
        cursor = conn.cursor()
        try:
            retire_procedures(cursor, names)
        finally:
            cursor.close()

    return retire
