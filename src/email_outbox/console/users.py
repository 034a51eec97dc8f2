"""The console's users file: one `name:scrypt$N$r$p$salt$hash` line per user (salt and hash in
base64), written by `email-outbox console-user add`. The standard library's scrypt: slow and salted,
with parameters stored per line so they can be raised later without breaking old entries.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from email_outbox.errors import ConfigError, InvalidInput

# A name that is safe as an audit actor, in a log line and in a header: no separators, no controls.
USER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
# New entries: N = 2^17 (128 MiB per check, OWASP's current guidance). Older lines keep the parameters
# they were written with and still verify; the console bounds how many checks run at once.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**17, 8, 1
# 128 * r * N bytes, and a little more that OpenSSL counts on top.
_MAXMEM = 128 * SCRYPT_R * SCRYPT_N + 16 * 1024 * 1024
MIN_PASSWORD_LENGTH = 8


def check_user_name(name: str) -> str:
    if not USER_NAME.match(name):
        raise InvalidInput(
            f"user name must be 1 to 64 of A-Z a-z 0-9 . _ @ + - and start with a letter or digit (got {name!r})"
        )
    return name


def hash_password(password: str, *, n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, maxmem=_MAXMEM, dklen=32)
    b64 = base64.b64encode
    return f"scrypt${n}${r}${p}${b64(salt).decode()}${b64(digest).decode()}"


def verify_password(password: str, encoded: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = encoded.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(
            password.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=_MAXMEM,
            dklen=len(expected),
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(actual, expected)


@dataclass(frozen=True)
class UsersFile:
    """The users and their password hashes, read once at start-up."""

    path: Path
    hashes: dict[str, str]

    @classmethod
    def load(cls, path: str | Path) -> UsersFile:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(
                f"users file {path} does not exist: create a user with"
                f" `email-outbox console-user add NAME --users-file {path}`"
            ) from None
        hashes: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            name, sep, encoded = line.partition(":")
            if not sep or not USER_NAME.match(name) or not encoded.startswith("scrypt$"):
                raise ConfigError(f"{path}:{number}: not a `name:scrypt$...` line")
            hashes[name] = encoded
        if not hashes:
            raise ConfigError(f"users file {path} holds no user")
        return cls(path, hashes)

    def verify(self, name: str, password: str) -> bool:
        encoded = self.hashes.get(name)
        if encoded is None:
            # The same work as for a real user, so timing does not tell which names exist.
            verify_password(password, _DUMMY_HASH)
            return False
        return verify_password(password, encoded)


# The parameters of a new entry, so an unknown name costs what a current user's check costs.
_DUMMY_HASH = f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="


def world_readable(path: Path) -> bool:
    return bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def add_user(path: str | Path, name: str, password: str) -> bool:
    """Write `name`'s hash into the file (created 0600), replacing an older entry. True if replaced."""
    check_user_name(name)
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(f"the password must be at least {MIN_PASSWORD_LENGTH} characters")
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    kept = [line for line in lines if line.partition(":")[0] != name]
    replaced = len(kept) != len(lines)
    kept.append(f"{name}:{hash_password(password)}")
    _write_private(path, "\n".join(kept) + "\n")
    return replaced


def remove_user(path: str | Path, name: str) -> bool:
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    kept = [line for line in lines if line.partition(":")[0] != name]
    if len(kept) == len(lines):
        return False
    _write_private(path, "\n".join(kept) + ("\n" if kept else ""))
    return True


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
