"""The `email-outbox` command: one module per group of subcommands, `main` puts them together."""

from email_outbox.cli.main import main

__all__ = ["main"]
