"""SES event records in the shapes SES documents ("Examples of event data that Amazon SES publishes
to Amazon SNS"), and the envelopes they travel in, for tests, the demo and the benchmark. moto does
not emit SES events, so the tests publish these through SNS to SQS themselves."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

ACCOUNT = "123456789012"


def _iso(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def mail(message_id: str, to: str, outbox_id: str | None, sent_at: datetime) -> dict[str, Any]:
    tags: dict[str, list[str]] = {
        "ses:configuration-set": ["outbox-events"],
        "ses:source-ip": ["192.0.2.0"],
        "ses:from-domain": ["example.com"],
        "ses:caller-identity": ["ses_user"],
    }
    if outbox_id is not None:
        tags["outbox_id"] = [outbox_id]
    return {
        "timestamp": _iso(sent_at),
        "source": "shop@example.com",
        "sourceArn": f"arn:aws:ses:us-east-1:{ACCOUNT}:identity/shop@example.com",
        "sendingAccountId": ACCOUNT,
        "messageId": message_id,
        "destination": [to],
        "headersTruncated": False,
        "headers": [{"name": "To", "value": to}, {"name": "Subject", "value": "Your receipt"}],
        "commonHeaders": {"from": ["shop@example.com"], "to": [to], "subject": "Your receipt"},
        "tags": tags,
    }


def record(
    event_type: str,
    message_id: str,
    to: str,
    outbox_id: str | None,
    sent_at: datetime,
    *,
    after: float = 1.0,
    bounce_type: str = "Permanent",
    bounce_subtype: str = "General",
) -> dict[str, Any]:
    """One SES event record; `after` seconds after the send for the event's own timestamp."""
    at = _iso(sent_at + timedelta(seconds=after))
    body: dict[str, Any] = {"eventType": event_type, "mail": mail(message_id, to, outbox_id, sent_at)}
    if event_type == "Send":
        body["send"] = {}
    elif event_type == "Delivery":
        body["delivery"] = {
            "timestamp": at,
            "processingTimeMillis": 546,
            "recipients": [to],
            "smtpResponse": "250 2.6.0 Message received",
            "reportingMTA": "a8-70.smtp-out.amazonses.com",
        }
    elif event_type == "Bounce":
        body["bounce"] = {
            "bounceType": bounce_type,
            "bounceSubType": bounce_subtype,
            "bouncedRecipients": [
                {
                    "emailAddress": to,
                    "action": "failed",
                    "status": "5.1.1",
                    "diagnosticCode": "smtp; 550 5.1.1 user unknown",
                }
            ],
            "timestamp": at,
            "feedbackId": f"0100{uuid.uuid4().hex}-000000",
            "reportingMTA": "dsn; mta.example.com",
        }
    elif event_type == "Complaint":
        body["complaint"] = {
            "complainedRecipients": [{"emailAddress": to}],
            "timestamp": at,
            "feedbackId": f"0100{uuid.uuid4().hex}-000000",
            "userAgent": "Mozilla/5.0",
            "complaintFeedbackType": "abuse",
            "arrivalDate": at,
        }
    elif event_type == "Reject":
        body["reject"] = {"reason": "Bad content"}
    elif event_type == "Rendering Failure":
        body["failure"] = {
            "errorMessage": "Attribute 'attributeName' is not present in the rendering data.",
            "templateName": "MyTemplate",
        }
    elif event_type == "DeliveryDelay":
        body["deliveryDelay"] = {
            "timestamp": at,
            "delayType": "TransientCommunicationFailure",
            "expirationTime": _iso(sent_at + timedelta(hours=12)),
            "delayedRecipients": [
                {"emailAddress": to, "status": "4.4.1", "diagnosticCode": "smtp; 421 4.4.1 Unable to connect"}
            ],
        }
    elif event_type == "Open":
        body["open"] = {"ipAddress": "192.0.2.1", "timestamp": at, "userAgent": "Mozilla/5.0"}
    return body


def sns_notification(
    rec: dict[str, Any], topic_arn: str = f"arn:aws:sns:us-east-1:{ACCOUNT}:ses-events"
) -> dict[str, Any]:
    """The SNS envelope an SQS subscriber without raw message delivery receives."""
    return {
        "Type": "Notification",
        "MessageId": str(uuid.uuid4()),
        "TopicArn": topic_arn,
        "Message": json.dumps(rec),
        "Timestamp": _iso(datetime.now(UTC)),
        "SignatureVersion": "1",
        "Signature": "EXAMPLE",
        "SigningCertURL": "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-EXAMPLE.pem",
        "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe",
    }


def eventbridge_event(rec: dict[str, Any]) -> dict[str, Any]:
    """An EventBridge event as SES sends it to the default event bus (a rule targets SQS)."""
    detail_type = {
        "Send": "Email Sent",
        "Delivery": "Email Delivered",
        "Bounce": "Email Bounced",
        "Complaint": "Email Complaint Received",
        "Reject": "Email Rejected",
        "DeliveryDelay": "Email Delivery Delayed",
        "Rendering Failure": "Email Rendering Failed",
    }.get(rec["eventType"], "Email " + rec["eventType"])
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.ses",
        "account": ACCOUNT,
        "time": _iso(datetime.now(UTC)),
        "region": "us-east-1",
        "resources": [f"arn:aws:ses:us-east-1:{ACCOUNT}:configuration-set/outbox-events"],
        "detail": rec,
    }
