"""`events --from-file`: the same envelopes from a file once (backfill, or replaying a Firehose
export). A file is one JSON array of messages, or JSON lines (one message per line); a Firehose
object, whose records may follow one another with no newline, is read as a stream of JSON values.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path


def messages_in(path: str) -> Iterator[str]:
    """Each message of the file as a JSON text of its own; a line that is not JSON comes back as it
    is, so the ingestor counts it as malformed and goes on."""
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8", errors="replace")
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            document = json.loads(stripped)
        except ValueError:
            document = None
        if isinstance(document, list):
            for item in document:
                yield json.dumps(item)
            return
    decoder = json.JSONDecoder()
    for line in text.splitlines():
        line = line.strip()
        position = 0
        while position < len(line):
            try:
                value, end = decoder.raw_decode(line, position)
            except ValueError:
                yield line[position:]
                break
            for item in value if isinstance(value, list) else [value]:
                yield json.dumps(item)
            position = end
            while position < len(line) and line[position] in " \t,":
                position += 1
