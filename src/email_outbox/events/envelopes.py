"""The envelopes SES event records arrive in, unwrapped to the records themselves.

- SNS notification (an SNS topic subscribed by an SQS queue): `{"Type": "Notification", "Message":
  "<the record, as a JSON string>", ...}`.
- SNS raw message delivery, Firehose exports, and a record pasted by hand: the bare record,
  `{"eventType": ..., "mail": {...}, ...}` (`notificationType` for identity notifications).
- EventBridge (a rule targeting SQS): `{"source": "aws.ses", "detail-type": ..., "detail": <the record>}`.

Anything else is a MalformedMessage: counted, never a crash.
"""

from __future__ import annotations

import json
from typing import Any

# SNS messages other than notifications: nothing to record, nothing wrong.
SNS_CONTROL_TYPES = frozenset({"SubscriptionConfirmation", "UnsubscribeConfirmation"})
# What SES sends a topic once it becomes an event destination: no mail, nothing to record.
SES_CONTROL_TYPES = frozenset({"AmazonSnsSubscriptionSucceeded"})


class MalformedMessage(ValueError):
    """A message that is not JSON, or not in any envelope SES events come in."""


def records_in(body: str | bytes) -> list[dict[str, Any]]:
    """The SES event records one message carries (usually one; none for an SNS control message)."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"not JSON: {exc}") from None
    except RecursionError:
        raise MalformedMessage("not JSON this reader accepts: nested too deeply") from None
    return unwrap(document)


def unwrap(document: Any, depth: int = 0) -> list[dict[str, Any]]:
    if depth > 2:
        raise MalformedMessage("envelopes nested too deeply")
    if not isinstance(document, dict):
        raise MalformedMessage(f"expected a JSON object, got {type(document).__name__}")
    kind = document.get("Type")
    if kind in SNS_CONTROL_TYPES:
        return []
    if kind == "Notification" and "Message" in document:
        message = document["Message"]
        if not isinstance(message, str):
            raise MalformedMessage("SNS notification whose Message is not a string")
        try:
            inner = json.loads(message)
        except (ValueError, RecursionError) as exc:
            raise MalformedMessage(f"SNS notification whose Message is not JSON: {exc!s:.200}") from None
        return unwrap(inner, depth + 1)
    if "detail" in document and "detail-type" in document:
        detail = document["detail"]
        if not isinstance(detail, dict):
            raise MalformedMessage("EventBridge event whose detail is not an object")
        return unwrap(detail, depth + 1)
    if "eventType" in document or "notificationType" in document:
        if (document.get("eventType") or document.get("notificationType")) in SES_CONTROL_TYPES:
            return []
        if not isinstance(document.get("mail"), dict):
            raise MalformedMessage("SES event record without a mail object")
        try:  # a JSON escape can make a lone surrogate, which no database text column takes
            json.dumps(document, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise MalformedMessage("SES event record with text that is not valid Unicode") from None
        return [document]
    raise MalformedMessage("not an SES event record, an SNS notification or an EventBridge event")
