"""The one DSN format every command takes: mysql://user:password@host:port/database[?unix_socket=PATH]."""

from __future__ import annotations

from dataclasses import dataclass
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
