"""The operator web console (`email-outbox console`): see the outbox, open an email, requeue and
resolve, safely. `create_app` builds the Starlette application; `console_cli` serves it."""

from email_outbox.console.app import ConsoleSettings, create_app

__all__ = ["ConsoleSettings", "create_app"]
