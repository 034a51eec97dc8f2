"""The one DSN format every command takes: mysql://user:password@host:port/database[?unix_socket=PATH].

Several hosts may be listed, comma-separated (mysql://u:pw@10.0.0.1:3306,10.0.0.2:3306/outbox): a
connection goes to the first that answers and, on a Galera node, is synced (email_outbox.db.repository).
"""

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
    # Further hosts after the first, tried in order when the first does not answer or is not synced.
    alternates: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, dsn: str) -> DatabaseDsn:
        try:
            parts = urlsplit(dsn)
        except ValueError as exc:  # `[::1` without its `]`: urllib's own words, never the DSN (its password)
            raise ConfigError(
                f"DSN is not a URL ({exc}): mysql://user:password@host:port/database, an IPv6 host as [::1]"
            ) from None
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
        userinfo, _, hostlist = parts.netloc.rpartition("@")
        user, _, password = userinfo.partition(":")
        endpoints = [_endpoint(item) for item in hostlist.split(",")] if hostlist else [("127.0.0.1", 3306)]
        (host, port), *alternates = endpoints
        return cls(
            user=unquote(user or "root"),
            password=unquote(password),
            host=host,
            port=port,
            database=database,
            unix_socket=socket,
            alternates=tuple(alternates),
        )

    def endpoints(self) -> list[tuple[str, int]]:
        """Every host:port to try, in the order the DSN lists them."""
        return [(self.host, self.port), *self.alternates]

    def at(self, host: str, port: int) -> DatabaseDsn:
        """The same DSN for one of its hosts only."""
        return DatabaseDsn(self.user, self.password, host, port, self.database, self.unix_socket)

    def with_database(self, database: str) -> DatabaseDsn:
        return DatabaseDsn(
            self.user, self.password, self.host, self.port, database, self.unix_socket, self.alternates
        )

    def url(self) -> str:
        auth = quote(self.user, safe="")
        if self.password:
            auth += ":" + quote(self.password, safe="")
        query = f"?unix_socket={quote(self.unix_socket)}" if self.unix_socket else ""
        hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in self.endpoints())
        return f"mysql://{auth}@{hosts}/{quote(self.database, safe='')}{query}"

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


def _endpoint(item: str) -> tuple[str, int]:
    """host, host:port, [v6], or [v6]:port."""
    item = item.strip()
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port_text = rest.removeprefix(":")
    else:
        host, _, port_text = item.partition(":")
    if not host:
        raise ConfigError(f"DSN host is empty in {item!r}")
    try:
        port = int(port_text) if port_text else 3306
    except ValueError:
        raise ConfigError(f"DSN port is not a number: {item!r}") from None
    if not 0 < port < 65536:
        raise ConfigError(f"DSN port must be 1 to 65535: {item!r}")
    return unquote(host), port
