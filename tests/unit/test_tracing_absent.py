"""Without OpenTelemetry installed (the `otel` extra), tracing is off and costs nothing: the package
imports no opentelemetry module, stores no trace context, and the send path's span is a no-op that
leaves the email untouched. Run in a process of its own where `import opentelemetry` fails."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
sys.modules["opentelemetry"] = None  # as if not installed: any import of it raises ImportError
from email_outbox.message import Message
from email_outbox.models import ClaimedEmail
from email_outbox.tracing import configure_from_environment, current_trace_context, send_attempt_span
from email_outbox.tracing.context import enabled, with_traceparent_tag

assert not enabled()
assert current_trace_context() is None
assert configure_from_environment("x")() is None
email = ClaimedEmail(1, "n", "a@example.com", None, "s", "t", None, 0, 5)
with send_attempt_span(1, "n", 1, None) as attempt:
    assert attempt.traceparent() is None
    assert with_traceparent_tag(email, attempt.traceparent()) is email
    attempt.finish("accepted", "m-1", None, None)
assert "trace_context" not in Message(to=["a@example.com"], subject="s", text="t").document()
assert not [m for m in sys.modules if m.startswith("opentelemetry.")]
print("ok")
"""


def test_without_opentelemetry_tracing_is_a_no_op() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=60,
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "PATH": ""},
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
