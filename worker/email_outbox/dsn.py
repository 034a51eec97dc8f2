"""The one DSN format every command takes: mysql://user:password@host:port/database[?unix_socket=PATH]."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from email_outbox.errors import ConfigError


@dataclass(frozen=True)
class DatabaseDsn:
    user: str
    password: str
    host: str
    port: int
    database: str
    unix_socket: str | None = None

    @classmethod
    def parse(cls, dsn: str) -> DatabaseDsn:
        parts = urlsplit(dsn)
        if parts.scheme not in ("mysql", "mariadb"):
            raise ConfigError(f"DSN must start with mysql:// (got {parts.scheme or 'no scheme'}://)")
        database = unquote(parts.path.lstrip("/"))
        if not database or "/" in database:
            raise ConfigError("DSN must name one database: mysql://user:password@host:port/database")
        query = parse_qs(parts.query)
        unknown = set(query) - {"unix_socket"}
        if unknown:
            raise ConfigError(f"DSN has unsupported options: {', '.join(sorted(unknown))}")
        socket = query.get("unix_socket", [None])[0]
        try:
            port = parts.port or 3306
        except ValueError as exc:
            raise ConfigError(f"DSN port is not a number: {exc}") from exc
        return cls(
            user=unquote(parts.username or "root"),
            password=unquote(parts.password or ""),
            host=parts.hostname or "127.0.0.1",
            port=port,
            database=database,
            unix_socket=socket,
        )

    def with_database(self, database: str) -> DatabaseDsn:
        return DatabaseDsn(self.user, self.password, self.host, self.port, database, self.unix_socket)

    def url(self) -> str:
        auth = quote(self.user, safe="")
        if self.password:
            auth += ":" + quote(self.password, safe="")
        query = f"?unix_socket={quote(self.unix_socket)}" if self.unix_socket else ""
        return f"mysql://{auth}@{self.host}:{self.port}/{quote(self.database, safe='')}{query}"

    def redacted(self) -> str:
        return (
            self.url().replace(":" + quote(self.password, safe="") + "@", ":***@")
            if self.password
            else self.url()
        )

    def connect_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {
            "user": self.user,
            "password": self.password,
            "database": self.database,
            "charset": "utf8mb4",
            "collation": "utf8mb4_unicode_ci",
        }
        if self.unix_socket:
            args["unix_socket"] = self.unix_socket
        else:
            args["host"] = self.host
            args["port"] = self.port
        return args


DSN_ENV = "EMAIL_OUTBOX_DSN"
DSN_FILE_ENV = "EMAIL_OUTBOX_DSN_FILE"
ARGV_PASSWORD_WARNING = (
    "email-outbox: warning: the DSN on the command line carries a password, which every user of this"
    " machine can read in the process list; use --dsn-file PATH or EMAIL_OUTBOX_DSN instead"
)


def read_dsn_file(path: str) -> str:
    """The DSN kept in a file (first non-empty line), so that no password ever sits in argv."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ConfigError(f"--dsn-file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--dsn-file {path}: not UTF-8 text") from None
    value = next((line.strip() for line in lines if line.strip()), "")
    if not value:
        raise ConfigError(f"--dsn-file {path}: the file is empty")
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        print(f"email-outbox: warning: {path} is readable by other users; chmod 600 it", file=sys.stderr)
    return value


def resolve_dsn_text(
    flag: str | None, flag_file: str | None, environ: Mapping[str, str] = os.environ
) -> str | None:
    """The DSN from, in order: --dsn-file, --dsn (warning when it holds a password), $EMAIL_OUTBOX_DSN,
    $EMAIL_OUTBOX_DSN_FILE. None when none is given."""
    if flag_file and flag:
        raise ConfigError("pass --dsn or --dsn-file, not both")
    if flag_file:
        return read_dsn_file(flag_file)
    if flag:
        if DatabaseDsn.parse(flag).password:
            print(ARGV_PASSWORD_WARNING, file=sys.stderr)
        return flag
    if environ.get(DSN_ENV):
        return environ[DSN_ENV]
    if environ.get(DSN_FILE_ENV):
        return read_dsn_file(environ[DSN_FILE_ENV])
    return None
