"""The SES client: sesv2 SendEmail with botocore's retries off, so no request is ever sent twice by it.

botocore's standard and legacy retry modes resend on read timeouts and 5xx; SendEmail has no
idempotency key, so a resend can deliver the email twice. total_max_attempts=1 and every outcome
goes to email_outbox.classify instead.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from email_outbox.classify import Decision, Outcome, classify_exception, classify_response
from email_outbox.config import WorkerConfig, aws_region
from email_outbox.models import ClaimedEmail

OUTBOX_ID_TAG = "outbox_id"


def make_client(config: WorkerConfig) -> Any:
    botocore_config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=config.ses_connect_timeout,
        read_timeout=config.ses_read_timeout,
        max_pool_connections=max(10, config.concurrency),
        tcp_keepalive=True,
    )
    # The endpoint comes from boto3's own AWS_ENDPOINT_URL_SESV2 / AWS_ENDPOINT_URL when set.
    return boto3.session.Session().client("sesv2", region_name=aws_region(), config=botocore_config)


def build_request(
    email: ClaimedEmail, default_from: str | None, configuration_set: str | None
) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if email.text_body is not None:
        body["Text"] = {"Data": email.text_body, "Charset": "UTF-8"}
    if email.html_body is not None:
        body["Html"] = {"Data": email.html_body, "Charset": "UTF-8"}
    request: dict[str, Any] = {
        "FromEmailAddress": email.from_address or default_from,
        "Destination": {"ToAddresses": [email.to_address]},
        "Content": {"Simple": {"Subject": {"Data": email.subject, "Charset": "UTF-8"}, "Body": body}},
        # The outbox id lets an operator find this message in SES event data (UnknownOutcome runbook).
        "EmailTags": [{"Name": OUTBOX_ID_TAG, "Value": str(email.id)}],
    }
    if configuration_set:
        request["ConfigurationSetName"] = configuration_set
    return request


class SesSender:
    """Sends one claimed email and says what happened; never raises for a provider outcome."""

    def __init__(self, config: WorkerConfig, client: Any | None = None) -> None:
        self.config = config
        self.client = client if client is not None else make_client(config)

    def send(self, email: ClaimedEmail) -> Decision:
        if not self.config.provider_enabled:
            return Decision(Outcome.DISABLED, error_code="ProviderDisabled")
        if not (email.from_address or self.config.default_from):
            return Decision(
                Outcome.PERMANENT,
                error_code="NoSender",
                error_message="the row has no from_address and EMAIL_OUTBOX_DEFAULT_FROM is not set",
            )
        request = build_request(email, self.config.default_from, self.config.ses_configuration_set)
        try:
            response = self.client.send_email(**request)
        except Exception as exc:  # every failure is classified; none escapes as a crash
            return classify_exception(exc)
        return classify_response(response)
