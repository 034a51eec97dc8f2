"""The SES client: sesv2 SendEmail with botocore's retries off, so no request is ever sent twice by it.

botocore's standard and legacy retry modes resend on read timeouts and 5xx; SendEmail has no
idempotency key, so a resend can deliver the email twice. total_max_attempts=1 and every outcome
goes to email_outbox.ses.classify instead. SendEmail goes through the lean client
(email_outbox.ses.lean_client) unless --ses-client boto3 says otherwise; both raise botocore's
exceptions, so the classification is one.
"""

from __future__ import annotations

import json
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import formataddr
from typing import Any, cast

import boto3
import idna
from botocore.config import Config

from email_outbox.models import Attachment, ClaimedEmail
from email_outbox.ses.classify import Decision, Outcome, classify_exception, classify_response, for_tenant
from email_outbox.ses.lean_client import LeanSesClient
from email_outbox.ses.settings import SesSettings, aws_region

OUTBOX_ID_TAG = "outbox_id"


def make_client(config: SesSettings, session: boto3.session.Session | None = None) -> Any:
    botocore_config = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=config.ses_connect_timeout,
        read_timeout=config.ses_read_timeout,
        max_pool_connections=max(10, config.concurrency),
        tcp_keepalive=True,
    )
    # The endpoint comes from boto3's own AWS_ENDPOINT_URL_SESV2 / AWS_ENDPOINT_URL when set.
    session = session if session is not None else boto3.session.Session()
    return session.client("sesv2", region_name=aws_region(), config=botocore_config)


def make_send_client(config: SesSettings) -> Any:
    """The client SendEmail goes through: the setting `ses_client` picks lean or boto3."""
    if config.ses_client == "boto3":
        return make_client(config)
    session = boto3.session.Session()
    return LeanSesClient(session, make_client(config, session))


def build_request(
    email: ClaimedEmail, default_from: str | None, configuration_set: str | None
) -> dict[str, Any]:
    """SendEmail's arguments for one claimed email, `Simple` or `Template` content."""
    options = email.options
    destination = {
        key: [encode_mailbox(m) for m in options.get(member) or []]
        for key, member in (("ToAddresses", "to"), ("CcAddresses", "cc"), ("BccAddresses", "bcc"))
    }
    if not options:
        destination["ToAddresses"] = [encode_mailbox(email.to_address)]
    headers = [{"Name": k, "Value": v} for k, v in (options.get("headers") or {}).items()]
    attachments = [_attachment(a) for a in email.attachments or ()]
    template = options.get("template")
    if template:
        content: dict[str, Any] = {
            "Template": {
                "TemplateName": template["name"],
                "TemplateData": json.dumps(template.get("data") or {}),
            }
        }
        part = content["Template"]
    else:
        body: dict[str, Any] = {}
        if email.text_body is not None:
            body["Text"] = {"Data": email.text_body, "Charset": "UTF-8"}
        if email.html_body is not None:
            body["Html"] = {"Data": email.html_body, "Charset": "UTF-8"}
        content = {"Simple": {"Subject": {"Data": email.subject, "Charset": "UTF-8"}, "Body": body}}
        part = content["Simple"]
    if headers:
        part["Headers"] = headers
    if attachments:
        part["Attachments"] = attachments
    request: dict[str, Any] = {
        "FromEmailAddress": encode_mailbox(options.get("from") or email.from_address or default_from or ""),
        "Destination": {k: v for k, v in destination.items() if v},
        "Content": content,
        # The outbox id lets the events consumer and an operator find this message in SES event data.
        "EmailTags": [{"Name": k, "Value": v} for k, v in (options.get("tags") or {}).items()]
        + [{"Name": OUTBOX_ID_TAG, "Value": str(email.id)}],
    }
    if options.get("reply_to"):
        request["ReplyToAddresses"] = [encode_mailbox(m) for m in options["reply_to"]]
    if options.get("configuration_set") or configuration_set:
        request["ConfigurationSetName"] = options.get("configuration_set") or configuration_set
    # SES's tenant: its reputation and sending status, not the account's, answer for this send.
    if email.ses_tenant_name:
        request["TenantName"] = email.ses_tenant_name
    return request


def encode_mailbox(mailbox: str) -> str:
    """`Name <address>` as it goes on the wire: a non-ASCII name as an RFC 2047 encoded word and a
    non-ASCII domain in Punycode (SES takes a 7-bit address and no SMTPUTF8), a name with specials
    quoted; a bare address with only its domain encoded."""
    name, address = split_mailbox(mailbox)
    address = ascii_domain(address)
    return formataddr((name, address), charset="utf-8") if name else address


def ascii_domain(address: str) -> str:
    """The address with a Unicode domain in its IDNA 2008 (UTS 46) Punycode form: `ann@exämple.com` ->
    `ann@xn--exmple-cua.com`. The local part stays as it is: the database refuses a non-ASCII one at
    enqueue (email_internal_check_local_part), so one here is a row from before that rule and fails
    the build (MessageNotBuildable) rather than reach SES mangled."""
    local, _, domain = address.rpartition("@")
    if domain.isascii():
        return address
    return f"{local}@{idna.encode(domain, uts46=True).decode('ascii')}"


def split_mailbox(mailbox: str) -> tuple[str, str]:
    """The display name (unquoted, '' if none) and the address; the database checked the shape."""
    if mailbox.endswith(">") and "<" in mailbox:
        cut = mailbox.rindex("<")
        name = mailbox[:cut].strip()
        if len(name) >= 2 and name[0] == name[-1] == '"':
            name = name[1:-1]
        return name, mailbox[cut + 1 : -1]
    return "", mailbox


def _attachment(a: Attachment) -> dict[str, Any]:
    out: dict[str, Any] = {
        "RawContent": a.content,
        "FileName": a.filename,
        "ContentType": a.content_type,
        "ContentDisposition": a.disposition.upper(),
        "ContentTransferEncoding": "BASE64",
    }
    if a.content_id:
        out["ContentId"] = a.content_id
    return out


def build_raw_message(email: ClaimedEmail, default_from: str | None) -> bytes:
    """The same message as MIME, for a botocore whose `Simple` content has no Headers or Attachments:
    multipart/mixed around multipart/related (HTML and its inline parts) around the alternatives."""
    options = email.options
    message = EmailMessage(policy=SMTP)
    message["From"] = encode_mailbox(options.get("from") or email.from_address or default_from or "")
    for header, member in (("To", "to"), ("Cc", "cc"), ("Reply-To", "reply_to")):
        if options.get(member):
            message[header] = ", ".join(encode_mailbox(m) for m in options[member])
    if not options:
        message["To"] = email.to_address
    message["Subject"] = email.subject
    for name, value in (options.get("headers") or {}).items():
        message[name] = value
    message.set_content(email.text_body or "", charset="utf-8")
    if email.html_body is not None:
        message.add_alternative(email.html_body, subtype="html", charset="utf-8")
    attachments = email.attachments or ()
    inline = [a for a in attachments if a.disposition == "inline"]
    if inline and email.html_body is not None:
        html_part = cast(EmailMessage, message.get_payload()[-1])  # type: ignore[index]
        for a in inline:
            maintype, subtype = a.content_type.split("/", 1)
            html_part.add_related(a.content, maintype, subtype, cid=f"<{a.content_id}>", filename=a.filename)
    for a in attachments:
        if a.disposition == "inline" and email.html_body is not None:
            continue
        maintype, subtype = a.content_type.split("/", 1)
        message.add_attachment(a.content, maintype, subtype, filename=a.filename, disposition=a.disposition)
    return message.as_bytes()


def simple_content_carries_everything(client: Any) -> bool:
    """The pinned botocore's `Simple` content has Headers and Attachments (SES added them in 2024-25)."""
    members = client.meta.service_model.shape_for("Message").members
    return "Headers" in members and "Attachments" in members


class SesSender:
    """Sends one claimed email and says what happened; never raises for a provider outcome."""

    def __init__(self, config: SesSettings, client: Any | None = None) -> None:
        self.config = config
        self.client = client if client is not None else make_send_client(config)
        self.simple_ok = simple_content_carries_everything(self.client)

    def send(self, email: ClaimedEmail) -> Decision:
        if not self.config.provider_enabled:
            return Decision(Outcome.DISABLED, error_code="ProviderDisabled")
        if not (email.from_address or self.config.default_from):
            return Decision(
                Outcome.PERMANENT,
                error_code="NoSender",
                error_message="the row has no from_address and EMAIL_OUTBOX_DEFAULT_FROM is not set",
            )
        try:
            request = self._request(email)
        except Exception as exc:  # the row's stored message cannot be made into a request: it never left
            return Decision(
                Outcome.PERMANENT,
                error_code="MessageNotBuildable",
                error_message=f"{type(exc).__name__}: {exc}"[:2000],
            )
        try:
            response = self.client.send_email(**request)
        except Exception as exc:  # every failure is classified; none escapes as a crash
            return for_tenant(classify_exception(exc), email.ses_tenant_name)
        return classify_response(response)

    def _request(self, email: ClaimedEmail) -> dict[str, Any]:
        request = build_request(email, self.config.default_from, self.config.ses_configuration_set)
        if not self.simple_ok and "Simple" in request["Content"]:
            simple = request["Content"].pop("Simple")
            if "Headers" in simple or "Attachments" in simple:
                request["Content"]["Raw"] = {"Data": build_raw_message(email, self.config.default_from)}
            else:
                request["Content"]["Simple"] = simple
        return request
