"""What the CLI prints, made safe for an operator's terminal: every control character shown, never
obeyed; tables, ages, times and JSON in one place for every command.

Notification ids, addresses, subjects and error messages come from callers and from SES. Printed raw,
an ESC starts a terminal escape sequence, CR or LF forges a line, and a bidi override reorders what
the operator reads. Each such character is printed as a visible escape (`\\x1b`, `\\u202e`) instead.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

# C0 controls (TAB, LF and CR included), DEL, C1 controls, the line and paragraph separators, and
# the bidirectional formatting characters (embeddings, overrides, isolates, marks).
UNSAFE_CHARACTERS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
    # Invisible format characters: `billing` + U+200B + `@example.com` must not read as billing@example.com.
    "\u00ad\u180e\u200b\u2060-\u2064\u206a-\u206f\ufeff\ufff9-\ufffb]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every unsafe character replaced by its escape; safe text comes back unchanged."""
    return UNSAFE_CHARACTERS.sub(_escape, text)


def error_line(code: str | None, message: str | None) -> str | None:
    """`code: message`, the code alone when there is no message (an erased or expired email), None without a code."""
    if code is None:
        return None
    return f"{code}: {message}" if message else code


def tab_separated(fields: Sequence[str]) -> str:
    """One line of fields separated by real tabs, each field made visible (a tab inside one is escaped)."""
    return "\t".join(visible(field) for field in fields)


def when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat() + "Z"
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def print_json(value: Any) -> None:
    # ASCII-only: every control, bidi and separator character arrives as a \u escape, never raw.
    print(json.dumps(jsonable(value), indent=2, ensure_ascii=True))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[visible(str(c)) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def short(text: str | None, width: int = 60) -> str:
    if not text:
        return "-"
    one_line = visible(" ".join(text.split()))
    return one_line if len(one_line) <= width else one_line[: width - 1] + "…"


def age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
