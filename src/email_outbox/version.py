"""The release: the package's version, which is also the version of its SQL contract (procedure names
and arguments, result columns, error numbers, the message document; docs/procedures.md "Releases"),
and how a database's schema compares with it. `email-outbox migrate` records the version that migrated
a database (email_outbox.schema.release); `status` compares it with the installed package."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

# The first release that records its version in the database (migration 0021): a database with no
# record was last migrated by an earlier one.
FIRST_RECORDING_RELEASE = "0.2.0"


def _package_version() -> str:
    try:
        return version("email-outbox")
    except PackageNotFoundError:  # a source tree on sys.path without an install
        return "0+unknown"


PACKAGE_VERSION = _package_version()

_SEMVER = re.compile(r"^(\d+)\.(\d+)\.(\d+)")


def version_key(text: str) -> tuple[int, int, int]:
    """MAJOR.MINOR.PATCH as numbers; what follows them (a pre-release or local part) is not compared."""
    match = _SEMVER.match(text)
    if not match:
        raise ValueError(f"not a MAJOR.MINOR.PATCH version: {text!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


@dataclass(frozen=True)
class SchemaRelease:
    """The release that last migrated a database (None: one before FIRST_RECORDING_RELEASE), beside
    the installed package's."""

    database: str | None
    package: str = PACKAGE_VERSION

    @property
    def state(self) -> str:
        """`current`, `older` (run migrate) or `newer` (upgrade the package)."""
        if self.database is None:
            return "older"
        ours, theirs = version_key(self.package), version_key(self.database)
        return "current" if ours == theirs else "older" if theirs < ours else "newer"

    def describe(self) -> str:
        recorded = self.database or f"before {FIRST_RECORDING_RELEASE}"
        if self.state == "current":
            return f"{recorded}, this package's"
        if self.state == "older":
            return f"{recorded}, older than this package ({self.package}): run `email-outbox migrate`"
        return (
            f"{recorded}, newer than this package ({self.package}): upgrade email-outbox"
            " (this package's `migrate` refuses to run on it)"
        )
