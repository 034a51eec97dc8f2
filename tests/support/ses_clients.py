"""The two SendEmail clients the worker can use (the setting ses_client), built the same way for a
test's endpoint, so one fault can be put to both and their classifications compared."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from email_outbox.ses.lean_client import LeanSesClient

CLIENT_KINDS = ("boto3", "lean")


def ses_client(
    kind: str,
    endpoint_url: str,
    *,
    verify: str | bool = True,
    read_timeout: float = 5,
    access_key: str = "test",
    secret_key: str = "test",
) -> Any:
    """A sesv2 client with botocore's retries off, as email_outbox.ses.sender.make_client makes it,
    or the lean client resolved from one."""
    session = boto3.session.Session(
        aws_access_key_id=access_key, aws_secret_access_key=secret_key, region_name="us-east-1"
    )
    client = session.client(
        "sesv2", endpoint_url=endpoint_url, verify=verify,
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=read_timeout),
    )  # fmt: skip
    return LeanSesClient(session, client) if kind == "lean" else client
