"""Where the SQL that ships with the project lives: procedures/ and db/migrations/.

In a source checkout (the editable install `make` uses) they sit beside src/; a wheel install
carries copies under <prefix>/share/email-outbox/. EMAIL_OUTBOX_HOME overrides both.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parents[3]


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
