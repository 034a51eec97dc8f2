"""The exception tree every layer raises. Driver errors are always chained (`raise ... from`).

OutboxError
 +-- InvalidInput          a procedure refused its arguments (SQLSTATE 45000); nothing was written
 |    +-- AccountMissing   `grant` was asked to grant to an account that does not exist
 +-- NotFound              a row or a database object that was asked for does not exist
 |    +-- SchemaNotInstalled  a procedure the caller needs is missing: run `email-outbox migrate`
 +-- AccessDenied          the account lacks the privilege (see docs/security.md for the roles)
 +-- DatabaseUnavailable   the server could not be reached or the connection was lost
 +-- ReadOnlyServer        a write reached a read-only server (a replica): send it to the primary
 +-- TransientDatabaseError  deadlock (1213), lock wait timeout (1205) or snapshot conflict (1020): safe to retry the call
 +-- ConfigError           a setting is missing or out of range
 +-- MigrationError        migrations could not be applied
"""


class OutboxError(Exception):
    """Base class of everything this package raises on purpose."""


class InvalidInput(OutboxError):
    """A stored procedure rejected its input with SQLSTATE 45000."""


class AccountMissing(InvalidInput):
    """A grant named an account that does not exist and --create was not given."""


class NotFound(OutboxError):
    """The row or object asked for does not exist."""


class SchemaNotInstalled(NotFound):
    """A stored procedure is missing from the database."""


class AccessDenied(OutboxError):
    """The server refused the call for want of a privilege (errors 1044, 1142, 1143, 1370)."""


class DatabaseUnavailable(OutboxError):
    """The database could not be reached, or the connection dropped mid-call."""


class ReadOnlyServer(OutboxError):
    """A write was refused by a server running with read_only (error 1290): a replica."""


class TransientDatabaseError(OutboxError):
    """A deadlock (also a Galera certification conflict), a lock wait timeout, a snapshot conflict, or
    a Galera node not ready: the statement was rolled back and may be retried. `errno` names which."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class ConfigError(OutboxError):
    """A configuration value is missing or invalid."""


class MigrationError(OutboxError):
    """Migrations could not be applied."""
