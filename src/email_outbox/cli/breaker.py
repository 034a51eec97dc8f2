"""`email-outbox breaker close`: an operator ends a provider outage hold at once.

A worker opens the shared breaker when SES fails broadly (docs/design.md, "Provider outages"); it
closes at the first probe that gets an answer. When the operator knows better (SES's status page is
green again, or the breaker was opened by mistake), this closes it for every replica now, logged in
email_provider_breaker_log with the operator's name and reason.
"""

from __future__ import annotations

import argparse

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, open_repository
from email_outbox.display import visible
from email_outbox.ses import PROVIDER


def cmd_breaker_close(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        closed = repo.breaker_close(PROVIDER, args.by, f"closed by an operator: {args.reason}")
    if not closed:
        print("the provider breaker was not open: nothing to close")
        return EXIT_NOTHING
    print(f"provider breaker closed by {visible(args.by)}: every worker sends again at its next claim")
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("breaker", help="the provider breaker every worker shares")
    actions = p.add_subparsers(dest="action", required=True)
    close = actions.add_parser("close", help="close it now: workers send again without waiting for a probe")
    add_dsn(close)
    close.add_argument("--by", required=True, help="your name, written to the breaker's log")
    close.add_argument("--reason", required=True, help="why (e.g. SES's status page is green again)")
    close.set_defaults(func=cmd_breaker_close)
