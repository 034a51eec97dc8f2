"""What an SES SendEmail outcome means for the row: docs/design.md section 7, as a pure function.

The worker acts on the Decision; nothing here touches the network or the database.
"""

from __future__ import annotations

import enum
import ssl
from dataclasses import dataclass
from typing import Any

from botocore import exceptions as bx


class Outcome(enum.Enum):
    ACCEPTED = "accepted"  # finalize_sent
    PERMANENT = "permanent"  # finalize_failure(permanent=1)
    TRANSIENT = "transient"  # finalize_failure(permanent=0) with backoff
    THROTTLED = "throttled"  # release with a delay, slow the replica down
    ACCOUNT_PROBLEM = "account_problem"  # release, pause the replica, log loudly
    TENANT_PAUSED = "tenant_paused"  # SES paused the send's tenant: release, pause that tenant only
    AMBIGUOUS = "ambiguous"  # finalize_unknown: never resent automatically
    DISABLED = "disabled"  # the worker's own switch: release with delay 0


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    message_id: str | None = None
    error_code: str | None = None
    error_message: str | None = None


PERMANENT_CODES = frozenset(
    {"MessageRejected", "BadRequestException", "InvalidParameterValue", "ValidationException"}
)
THROTTLE_CODES = frozenset(
    {"TooManyRequestsException", "LimitExceededException", "Throttling", "ThrottlingException"}
)
ACCOUNT_CODES = frozenset(
    {
        "SendingPausedException",
        "AccountSuspendedException",
        "MailFromDomainNotVerifiedException",
        "NotFoundException",
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "ExpiredTokenException",
        "ExpiredToken",
    }
)


# SES's definite refusal of a send whose sending is paused: the email was not sent.
SENDING_PAUSED = "SendingPausedException"


def for_tenant(decision: Decision, ses_tenant_name: str | None) -> Decision:
    """A send that named an SES tenant and was refused as paused: that tenant's sending is paused, not
    the account's (the outbox's other tenants go on), and never the email's fault."""
    if (
        ses_tenant_name
        and decision.outcome is Outcome.ACCOUNT_PROBLEM
        and decision.error_code == SENDING_PAUSED
    ):
        return Decision(
            Outcome.TENANT_PAUSED, error_code=decision.error_code, error_message=decision.error_message
        )
    return decision


def classify_response(response: dict[str, Any]) -> Decision:
    message_id = response.get("MessageId")
    if isinstance(message_id, str) and message_id:
        return Decision(Outcome.ACCEPTED, message_id=message_id)
    # A 200 without a MessageId: SES may or may not have queued it.
    return Decision(
        Outcome.AMBIGUOUS, error_code="NoMessageId", error_message="2xx response without a MessageId"
    )


def classify_exception(exc: BaseException) -> Decision:
    message = f"{type(exc).__name__}: {exc}"[:2000]
    if isinstance(exc, bx.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "Unknown")
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        text = f"{code}: {error.get('Message') or ''}"[:2000]
        if code in THROTTLE_CODES or status == 429:
            return Decision(Outcome.THROTTLED, error_code=code, error_message=text)
        if code in ACCOUNT_CODES:
            return Decision(Outcome.ACCOUNT_PROBLEM, error_code=code, error_message=text)
        if code in PERMANENT_CODES:
            return Decision(Outcome.PERMANENT, error_code=code, error_message=text)
        if status >= 500:
            # The server answered that it failed: the message was not accepted.
            return Decision(Outcome.TRANSIENT, error_code=code, error_message=text)
        if 400 <= status < 500:
            # Any other 4xx is a definite refusal of this request: retrying cannot help it.
            return Decision(Outcome.PERMANENT, error_code=code, error_message=text)
        return Decision(Outcome.AMBIGUOUS, error_code=code, error_message=text)
    # Order matters: ConnectTimeoutError and the others below are ConnectionError subclasses too.
    if isinstance(exc, bx.ReadTimeoutError):
        return Decision(Outcome.AMBIGUOUS, error_code="ReadTimeout", error_message=message)
    if isinstance(exc, (bx.ConnectTimeoutError, bx.EndpointConnectionError, bx.ProxyConnectionError)):
        return Decision(Outcome.TRANSIENT, error_code="ConnectFailed", error_message=message)
    if isinstance(exc, bx.SSLError):
        # botocore raises SSLError for a TLS failure at any point, also while the answer is read after
        # the request went out (a connection cut without a TLS close). Only a certificate refused in the
        # handshake proves the request never left.
        if _caused_by(exc, ssl.SSLCertVerificationError):
            return Decision(Outcome.TRANSIENT, error_code="TLSCertificateRejected", error_message=message)
        return Decision(Outcome.AMBIGUOUS, error_code="TLSError", error_message=message)
    if isinstance(exc, bx.NoCredentialsError):
        return Decision(Outcome.ACCOUNT_PROBLEM, error_code="NoCredentials", error_message=message)
    if isinstance(exc, bx.ParamValidationError):
        return Decision(Outcome.PERMANENT, error_code="ParamValidation", error_message=message)
    # Connection reset or closed after the request was written, a protocol error, anything else:
    # the request may have reached SES.
    return Decision(Outcome.AMBIGUOUS, error_code=type(exc).__name__, error_message=message)


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `kind` is in `exc`'s chain: causes, contexts, and the errors botocore and urllib3 wrap
    (botocore keeps it in `kwargs["error"]`, urllib3 in `args`)."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        item = todo.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        if isinstance(item, kind):
            return True
        seen.add(id(item))
        todo += [item.__cause__, item.__context__, *item.args, getattr(item, "kwargs", {}).get("error")]
    return False
