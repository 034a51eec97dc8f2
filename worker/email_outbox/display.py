"""Stored text made safe for an operator's terminal: every control character shown, never obeyed.

Notification ids, addresses, subjects and error messages come from callers and from SES. Printed raw,
an ESC starts a terminal escape sequence, CR or LF forges a line, and a bidi override reorders what
the operator reads. Each such character is printed as a visible escape (`\\x1b`, `\\u202e`) instead.
"""

from __future__ import annotations

import re

# C0 controls (TAB, LF and CR included), DEL, C1 controls, the line and paragraph separators, and
# the bidirectional formatting characters (embeddings, overrides, isolates, marks).
UNSAFE_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every unsafe character replaced by its escape; safe text comes back unchanged."""
    return UNSAFE_CHARACTERS.sub(_escape, text)
