"""The settings the SES client and the event consumer's AWS clients take, declared here so ses/ and
events/ depend on no caller's configuration: the worker's WorkerConfig provides them (it has these
attributes), and any other caller may too."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Protocol

# How the worker talks to SES: its own lean HTTPS client, or boto3's.
SES_CLIENTS = ("lean", "boto3")


class SesSettings(Protocol):
    @property
    def ses_connect_timeout(self) -> float: ...
    @property
    def ses_read_timeout(self) -> float: ...
    @property
    def concurrency(self) -> int: ...  # sends in flight: the client keeps that many connections
    @property
    def ses_client(self) -> str: ...  # one of SES_CLIENTS
    @property
    def provider_enabled(self) -> bool: ...
    @property
    def default_from(self) -> str | None: ...
    @property
    def ses_configuration_set(self) -> str | None: ...


def aws_region(environ: Mapping[str, str] | None = None) -> str | None:
    """boto3 reads only AWS_DEFAULT_REGION; many platforms set only AWS_REGION. Honour both."""
    environ = os.environ if environ is None else environ
    return environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None
