"""The exception tree every layer raises. Driver errors are always chained (`raise ... from`).

OutboxError
 +-- InvalidInput          a procedure refused its arguments (SQLSTATE 45000); nothing was written
 |    +-- one class per refusal errno (InvalidArgument 45001 ... UnsafeText 45010): REFUSALS below
 |    +-- AccountMissing   `grant` was asked to grant to an account that does not exist
 +-- NotFound              a row or a database object that was asked for does not exist
 |    +-- SchemaNotInstalled  a procedure the caller needs is missing: run `email-outbox migrate`
 +-- AccessDenied          the account lacks the privilege (see docs/security.md for the roles)
 +-- DatabaseUnavailable   the server could not be reached or the connection was lost
 +-- ReadOnlyServer        a write reached a read-only server (a replica): send it to the primary
 +-- TransientDatabaseError  deadlock (1213), lock wait timeout (1205) or snapshot conflict (1020): safe to retry the call
 +-- ConfigError           a setting is missing or out of range
 +-- MigrationError        migrations could not be applied

A procedure's refusal carries MYSQL_ERRNO by rule class (docs/procedures.md, "Errors"). REFUSALS is the
one declaration of those numbers: the Errors table is generated from it (email_outbox.schema.refusals)
and a test checks every SIGNAL in procedures/ against it.
"""

from __future__ import annotations

import re
from typing import ClassVar


class OutboxError(Exception):
    """Base class of everything this package raises on purpose."""


class InvalidInput(OutboxError):
    """A stored procedure rejected its input with SQLSTATE 45000, or a command refused its arguments
    before calling one. A procedure's refusal is raised as the subclass of its errno (REFUSALS)."""

    # The MYSQL_ERRNO of a procedure's refusal of this class; None for the base and for Python's own.
    errno: ClassVar[int | None] = None


# The refusal classes: the docstring's first paragraph is the meaning shown in docs/procedures.md.
class InvalidArgument(InvalidInput):
    """An argument, or a member's value, breaks its rule: missing, out of range, too long, not one of
    the values allowed, or not in the format required. The refusal for any rule no other class names."""

    errno = 45001


class InvalidMember(InvalidInput):
    """A JSON document argument (the message of `email_enqueue_message`, the outcomes of
    `email_finalize_batch`) is not the JSON asked for, or has an unknown member, a member given twice,
    a member of the wrong JSON type, or members that exclude each other."""

    errno = 45002


class InvalidAddress(InvalidInput):
    """An address, a mailbox (`Name <address>`) or a recipient list breaks the address rules: a
    required address missing, not one bare address, a display name with a forbidden character (an @
    among them: a name must not read as an address), a recipient whose local part is not ASCII, a list
    that is not a list of addresses, other than 1 to 50 recipients in all, or a sender (from address,
    allow-list entry) that is not ASCII."""

    errno = 45003


class InvalidHeader(InvalidInput):
    """A custom header of a message: more than 50, a name outside RFC 5322's characters, a name SES,
    the outbox or a receiving system sets (Authentication-Results, ARC-*, DKIM-*) or that asks for
    mail to go elsewhere (Disposition-Notification-To, Return-Receipt-To, Errors-To), a name given
    twice (compared case-insensitively), or a value over 998 characters."""

    errno = 45004


class SenderNotAllowed(InvalidInput):
    """The from address is not on the calling account's sender allow-list (`email-outbox senders add`)."""

    errno = 45005


class MessageTooLarge(InvalidInput):
    """The message is over a size limit: a body over 16 MiB, template data over 256 KiB, or bodies and
    base64 attachments together over SES's 40 MB."""

    errno = 45006


class InvalidClaim(InvalidInput):
    """A claim's own arguments: the claim token (1 to 64 characters), the lease (1 to 86400 seconds) or
    the claimer's name (1 to 191 characters). A token that no longer owns the row is not a refusal: the
    call answers `affected` 0."""

    errno = 45007


class WrongState(InvalidInput):
    """The row is not in a state the operation applies to, and the message says why: a redrive of a
    Failed email whose content is gone (erased, bodies purged, an attachment missing) would send it
    empty."""

    errno = 45009


class UnsafeText(InvalidInput):
    """A text that becomes a mail header or a log field holds a control character (TAB, CR and LF
    included), a line or paragraph separator, a bidi formatting character, or an invisible format
    character (soft hyphen, zero width space, word joiner, BOM)."""

    errno = 45010


class ConfigurationSetNotAllowed(InvalidInput):
    """A message names a configuration set that is not on the operators' list
    (`email-outbox configuration-sets add`): a set with no event destination would hide the message's
    bounces and complaints from the suppression list."""

    errno = 45011


class TenantNotAllowed(InvalidInput):
    """A message names a tenant the calling account may not use (or none of that name: the answer does
    not tell which), or asks for a priority above its tenant's highest (`email-outbox tenants`)."""

    errno = 45012


class QuotaExceeded(InvalidInput):
    """The message's tenant already has as many waiting rows as its cap allows (`max_waiting_rows`):
    retry later, or ask an operator to raise the cap."""

    errno = 45013


# The errno table, in number order. A new class: a subclass above with the next free errno and its
# meaning as docstring, added here; then regenerate the table (docs/procedures.md, "Errors").
REFUSALS: tuple[type[InvalidInput], ...] = (
    InvalidArgument,
    InvalidMember,
    InvalidAddress,
    InvalidHeader,
    SenderNotAllowed,
    MessageTooLarge,
    InvalidClaim,
    WrongState,
    UnsafeText,
    ConfigurationSetNotAllowed,
    TenantNotAllowed,
    QuotaExceeded,
)
REFUSAL_BY_ERRNO: dict[int, type[InvalidInput]] = {
    cls.errno: cls for cls in REFUSALS if cls.errno is not None
}


def refusal_from_driver_error(exc: BaseException) -> InvalidInput | None:
    """The refusal a procedure's SQLSTATE 45000 stands for, from any MySQL driver's error: errno and
    message are attributes in mysql-connector and args (errno, message) in PyMySQL and mysqlclient, and
    a framework may wrap it (Django's DatabaseError, SQLAlchemy's DBAPIError: the driver's is the cause).
    None when the error is not a refusal."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        errno = getattr(current, "errno", None)
        message = getattr(current, "msg", None)
        args: tuple[object, ...] = tuple(getattr(current, "args", ()))
        if not isinstance(errno, int) and len(args) >= 2 and isinstance(args[0], int):
            errno, message = args[0], str(args[1])
        if isinstance(errno, int) and errno < 0:  # PyMySQL reads the errno as a signed 16-bit number
            errno += 1 << 16
        if isinstance(errno, int) and errno in REFUSAL_BY_ERRNO:
            return REFUSAL_BY_ERRNO[errno](str(message or current))
        current = getattr(current, "orig", None) or current.__cause__
    return None


def refusal_name(cls: type[InvalidInput]) -> str:
    """The class's name as the Errors table spells it for every language: InvalidAddress -> invalid_address."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


class AccountMissing(InvalidInput):
    """A grant named an account that does not exist and --create was not given."""


class AccountExists(InvalidInput):
    """`grant --create` named an account that already exists."""


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
