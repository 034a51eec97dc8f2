"""Log set-up: one line per transition and per error, as text for people or JSON for machines."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from email_outbox.display import visible

# Attributes every LogRecord has; anything else was passed in `extra` and belongs in the line.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            **_extras(record),
        }
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """One line per record: every value passes through `visible`, so text that came from a caller (a
    notification id, an SES error message) cannot start a forged line or drive a terminal. A value
    with a space or a quote is quoted. A traceback follows on indented, escaped lines."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        head = f"{self.formatTime(record)} {record.levelname} {record.name}: {visible(record.getMessage())}"
        extras = _extras(record)
        if extras:
            head += " " + " ".join(f"{k}={_field(v)}" for k, v in extras.items())
        if record.exc_info:
            trace = self.formatException(record.exc_info)
            head += "".join(f"\n    {visible(line)}" for line in trace.splitlines())
        return head


def _field(value: object) -> str:
    text = visible(str(value))
    if not text or any(c in text for c in ' "='):
        return '"' + text.replace('"', '\\"') + '"'
    return text


def configure_logging(log_format: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("botocore", "boto3", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
