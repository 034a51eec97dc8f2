"""`email-outbox senders list|add|remove`: the allow-list of addresses and domains enqueuers may send as.

Every change goes through a procedure (email_sender_add, email_sender_remove) that logs who, from
which database account, when and why, in email_allowed_senders_log.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, open_repository
from email_outbox.db.repository import OutboxRepository
from email_outbox.display import print_json, tab_separated, visible


def cmd_senders(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        if args.action == "list":
            return _list(repo, as_json=args.json)
        if args.action == "add":
            added = repo.sender_add(args.sender, args.account, args.by, args.reason)
            print(f"{'allowed' if added else 'already allowed'}: {_who(args.sender, args.account)}")
            return EXIT_OK if added else EXIT_NOTHING
        removed = repo.sender_remove(args.sender, args.account, args.by, args.reason)
        print(f"{'removed' if removed else 'not on the list'}: {_who(args.sender, args.account)}")
        return EXIT_OK if removed else EXIT_NOTHING


def _who(sender: str, account: str) -> str:
    return visible(f"{sender} for {'every account' if not account else 'account ' + account}")


def _list(repo: OutboxRepository, *, as_json: bool) -> int:
    senders = repo.allowed_senders()
    if as_json:
        print_json([asdict(s) for s in senders])
    for s in [] if as_json else senders:
        fields = (s.sender, s.account or "*", f"{s.added_at:%Y-%m-%d %H:%M} UTC", s.added_by, s.reason)
        print(tab_separated(fields))
    return EXIT_OK if senders else EXIT_NOTHING


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("senders", help="the addresses and domains enqueuers may send as")
    actions = p.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every allowed sender")
    add_dsn(listing)
    listing.add_argument("--json", action="store_true")
    for name, verb in (("add", "allow"), ("remove", "stop allowing")):
        change = actions.add_parser(name, help=f"{verb} an address, or @domain for a whole domain")
        add_dsn(change)
        change.add_argument("sender", help="billing@example.com, or @example.com for the whole domain")
        change.add_argument(
            "--account", default="", help="only for this database user name (default: every account)"
        )
        change.add_argument("--by", required=True, help="your name, written to the log")
        change.add_argument("--reason", required=True, help="why, written to the log")
    p.set_defaults(func=cmd_senders)
