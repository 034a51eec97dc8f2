"""CHANGELOG.md keeps up with the release: it has a section for the version pyproject.toml declares,
sections newest first, and every procedure whose header says it is deprecated is listed under that
release's "Deprecated (dropped in ...)" with a later release named to drop it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from email_outbox.version import version_key
from email_outbox_devtools.procedure_index import DEPRECATED, header, public_procedures

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def releases() -> list[str]:
    return re.findall(r"^## (\d+\.\d+\.\d+)\b", CHANGELOG, flags=re.M)


def section(version: str) -> str:
    start = CHANGELOG.index(f"## {version}")
    following = CHANGELOG.find("\n## ", start + 1)
    return CHANGELOG[start : following if following > 0 else None]


def test_the_changelog_has_the_declared_version_first_and_releases_newest_first() -> None:
    listed = releases()
    assert listed and listed[0] == VERSION, f"CHANGELOG.md's newest section is not ## {VERSION}"
    assert listed == sorted(listed, key=version_key, reverse=True)


def test_every_deprecation_names_the_later_release_that_drops_it() -> None:
    for version in releases():
        for dropped_in in re.findall(r"^### Deprecated \(dropped in (\S+)\)", section(version), flags=re.M):
            assert version_key(dropped_in) > version_key(version), (version, dropped_in)


def test_every_deprecated_procedure_is_in_this_releases_deprecations() -> None:
    current = section(VERSION)
    match = re.search(r"^### Deprecated \(dropped in \S+\)\n(.*?)(?=^###|\Z)", current, flags=re.M | re.S)
    listed = match.group(1) if match else ""
    for procedure in public_procedures():
        if header(procedure).startswith(DEPRECATED):
            assert f"`{procedure.name}`" in listed, f"{procedure.name} is deprecated: list it in CHANGELOG.md"
