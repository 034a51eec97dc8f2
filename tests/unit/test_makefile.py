"""`make help` lists every target of the Makefile, each with its one line (a `## ` comment on the
target's line), so a new target cannot hide from it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_make_help_lists_every_target() -> None:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, flags=re.M))
    assert {"help", "test", "demo", "dev", "lint"} <= targets
    result = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert targets - listed == set(), "targets with no `## ` line for make help"
