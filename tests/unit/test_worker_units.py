"""Pure worker policy: outcome classification (docs/design.md section 7), backoff, configuration."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from botocore import exceptions as bx

from email_outbox.errors import ConfigError
from email_outbox.ses.classify import Outcome, classify_exception, classify_response
from email_outbox.ses.settings import aws_region
from email_outbox.worker.backoff import backoff_ceiling, retry_delay_seconds
from email_outbox.worker.config import load_config

DSN = "mysql://u:p@127.0.0.1:3306/db"


def client_error(code: str, status: int) -> bx.ClientError:
    return bx.ClientError(
        {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "SendEmail"
    )


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (client_error("MessageRejected", 400), Outcome.PERMANENT),
        (client_error("BadRequestException", 400), Outcome.PERMANENT),
        (bx.EndpointConnectionError(endpoint_url="http://x"), Outcome.TRANSIENT),
        (bx.ConnectTimeoutError(endpoint_url="http://x"), Outcome.TRANSIENT),
        (client_error("InternalFailure", 500), Outcome.TRANSIENT),
        (client_error("ServiceUnavailable", 503), Outcome.TRANSIENT),
        (client_error("TooManyRequestsException", 429), Outcome.THROTTLED),
        (client_error("LimitExceededException", 400), Outcome.THROTTLED),
        (client_error("Throttling", 400), Outcome.THROTTLED),
        (client_error("SendingPausedException", 400), Outcome.ACCOUNT_PROBLEM),
        (client_error("AccountSuspendedException", 400), Outcome.ACCOUNT_PROBLEM),
        (client_error("MailFromDomainNotVerifiedException", 400), Outcome.ACCOUNT_PROBLEM),
        (client_error("NotFoundException", 404), Outcome.ACCOUNT_PROBLEM),
        (bx.ReadTimeoutError(endpoint_url="http://x"), Outcome.AMBIGUOUS),
        (bx.ConnectionClosedError(endpoint_url="http://x"), Outcome.AMBIGUOUS),
        (ConnectionResetError("reset by peer"), Outcome.AMBIGUOUS),
        (RuntimeError("anything unexpected"), Outcome.AMBIGUOUS),
    ],
)
def test_classification_table(exc: BaseException, outcome: Outcome) -> None:
    assert classify_exception(exc).outcome is outcome


def test_accepted_needs_a_message_id() -> None:
    decision = classify_response({"MessageId": "abc"})
    assert (decision.outcome, decision.message_id) == (Outcome.ACCEPTED, "abc")
    assert classify_response({}).outcome is Outcome.AMBIGUOUS


def test_read_timeout_is_not_mistaken_for_a_connect_failure() -> None:
    # ConnectTimeoutError and ReadTimeoutError share ancestry; only the connect one is safe to retry.
    assert classify_exception(bx.ReadTimeoutError(endpoint_url="u")).outcome is Outcome.AMBIGUOUS
    assert classify_exception(bx.ConnectTimeoutError(endpoint_url="u")).outcome is Outcome.TRANSIENT


def test_backoff_ceiling_grows_and_caps() -> None:
    assert [backoff_ceiling(a, 2, 60) for a in range(1, 8)] == [2, 4, 8, 16, 32, 60, 60]
    assert backoff_ceiling(10_000, 2, 60) == 60


def test_backoff_full_jitter_bounds_and_spread() -> None:
    rng = random.Random(1)
    draws = [retry_delay_seconds(5, 2, 900, rng) for _ in range(2000)]
    assert min(draws) >= 0 and max(draws) <= 32
    assert len(set(draws)) > 20, "full jitter spreads retries over the window"
    assert sum(draws) / len(draws) == pytest.approx(16.5, abs=1.5)
    assert max(retry_delay_seconds(50, 2, 900, rng) for _ in range(500)) <= 900


def test_config_defaults_and_flags_over_environment() -> None:
    env = {"EMAIL_OUTBOX_DSN": DSN, "EMAIL_OUTBOX_CONCURRENCY": "4", "EMAIL_OUTBOX_LEASE_SECONDS": "300"}
    config = load_config({"concurrency": "6"}, env)
    assert (config.concurrency, config.lease_seconds, config.provider_enabled) == (6, 300, True)
    assert ":" in config.worker_id
    assert load_config({}, {"EMAIL_OUTBOX_DSN": DSN}).lease_seconds == 120


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "EMAIL_OUTBOX_DSN"),
        ({"EMAIL_OUTBOX_DSN": "postgres://x/y"}, "mysql://"),
        ({"EMAIL_OUTBOX_CONCURRENCY": "many"}, "EMAIL_OUTBOX_CONCURRENCY must be an integer"),
        ({"EMAIL_OUTBOX_CONCURRENCY": "0"}, "EMAIL_OUTBOX_CONCURRENCY must be 1 to 1000"),
        ({"EMAIL_OUTBOX_LEASE_SECONDS": "0"}, "EMAIL_OUTBOX_LEASE_SECONDS"),
        ({"EMAIL_OUTBOX_MAX_SEND_RATE": "-1"}, "EMAIL_OUTBOX_MAX_SEND_RATE"),
        ({"EMAIL_OUTBOX_PROVIDER_ENABLED": "maybe"}, "EMAIL_OUTBOX_PROVIDER_ENABLED must be true or false"),
        ({"EMAIL_OUTBOX_DEFAULT_FROM": "nobody"}, "EMAIL_OUTBOX_DEFAULT_FROM"),
        ({"EMAIL_OUTBOX_RETRY_BASE_SECONDS": "10", "EMAIL_OUTBOX_RETRY_MAX_SECONDS": "5"}, "RETRY_MAX"),
        ({"EMAIL_OUTBOX_LOG_FORMAT": "xml"}, "EMAIL_OUTBOX_LOG_FORMAT"),
    ],
)
def test_config_validation_errors(env: dict[str, str], message: str) -> None:
    base = {"EMAIL_OUTBOX_DSN": DSN} if "EMAIL_OUTBOX_DSN" not in env and env else {}
    with pytest.raises(ConfigError, match=message):
        load_config({}, {**base, **env})


def test_timeouts_must_fit_in_half_the_lease() -> None:
    env = {"EMAIL_OUTBOX_DSN": DSN, "EMAIL_OUTBOX_LEASE_SECONDS": "20"}
    assert load_config({"ses_connect_timeout": "3", "ses_read_timeout": "7"}, env).lease_seconds == 20
    with pytest.raises(ConfigError, match="half the lease"):
        load_config({"ses_connect_timeout": "3", "ses_read_timeout": "7.5"}, env)
    with pytest.raises(ConfigError, match="half the lease"):
        load_config({}, env)  # the defaults (5 s + 20 s) do not fit a 20 s lease


def test_region_from_aws_region_or_default() -> None:
    assert aws_region({"AWS_REGION": "eu-west-1"}) == "eu-west-1"
    assert aws_region({"AWS_DEFAULT_REGION": "us-east-2"}) == "us-east-2"
    assert aws_region({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "us-east-2"}) == "eu-west-1"
    assert aws_region({}) is None


def test_every_setting_is_declared_once_and_the_readme_table_is_generated_from_it() -> None:
    from pathlib import Path

    from email_outbox.cli.main import build_parser
    from email_outbox.worker.config import ENV_PREFIX, SETTINGS, settings_table

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert settings_table() in readme, "README's settings table is stale: paste config.settings_table()"
    envs = [s.metadata["env"] for s in SETTINGS]
    assert len(set(envs)) == len(envs)
    worker = build_parser()._subparsers._group_actions[0].choices["worker"]  # type: ignore[union-attr]
    flags = {o for a in worker._actions for o in a.option_strings}
    assert {"--" + s.name.replace("_", "-") for s in SETTINGS} <= flags
    # A flag and its variable reach the same field.
    from_env = load_config({}, {f"{ENV_PREFIX}DSN": "mysql://u@h/db", f"{ENV_PREFIX}BATCH_SIZE": "3"})
    from_flag = load_config({"dsn": "mysql://u@h/db", "batch_size": "3"}, {})
    assert from_env.batch_size == from_flag.batch_size == 3


def test_procedure_arguments_bind_by_the_names_in_procedures() -> None:
    from email_outbox.db.repository import OutboxRepository
    from email_outbox.procedure_files import parameter_names

    assert parameter_names("email_finalize_sent") == ("id", "claim_token", "provider_message_id")
    repo = OutboxRepository(None)  # type: ignore[arg-type]  # refused before any connection is used
    with pytest.raises(TypeError, match="email_finalize_sent takes id, claim_token, provider_message_id"):
        repo._call("email_finalize_sent", id=1, token="t", provider_message_id="m")


def test_every_worker_log_line_and_metric_is_listed_in_the_operations_guide() -> None:
    """docs/design.md promises operators one place for the worker's log lines and metric names."""
    root = Path(__file__).resolve().parents[2]
    guide = (root / "docs" / "operations.md").read_text()
    logs_section = guide.split("### Log lines", 1)[1].split("\n### ", 1)[0]
    listed = [
        m
        for line in logs_section.splitlines()
        if line.startswith("| `")
        for m in re.findall(r"`([^`]+)`", line.split(" | ")[0])
    ]
    sources = [*(root / "src/email_outbox/worker").glob("*.py"), root / "src/email_outbox/db/connection.py"]
    call = re.compile(r"log\.(?:debug|info|warning|error|critical|exception)\(\s*\"([^\"]+)\"")
    messages = {m for path in sources for m in call.findall(path.read_text())}
    assert len(messages) > 20

    def is_listed(message: str) -> bool:
        return any(
            m == message or (m.endswith("...") and message.startswith(m[:-3].rstrip())) for m in listed
        )

    assert sorted(m for m in messages if not is_listed(m)) == []
    metrics = set(
        re.findall(r'"(email_outbox_[a-z_]+)"', (root / "src/email_outbox/worker/metrics.py").read_text())
    )
    assert len(metrics) > 10 and sorted(n for n in metrics if n not in guide) == []
