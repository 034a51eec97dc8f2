"""`email-outbox suppression list|add|remove`: the addresses no email is handed to SES for.

Permanent bounces and complaints add addresses automatically (`email-outbox events`); operators add
and remove by hand. Every change goes through a procedure (email_suppression_add, _remove) and is
logged with who, from which database account, when and why in email_suppressed_addresses_log.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, open_repository
from email_outbox.display import print_json, table, when


def cmd_suppression(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        if args.action == "list":
            entries = repo.suppressed_addresses(args.limit)
            if args.json:
                print_json([asdict(e) for e in entries])
            elif entries:
                print(
                    table(
                        ["address", "reason", "added (UTC)", "by", "detail"],
                        [[e.address, e.reason, when(e.added_at), e.added_by, e.detail] for e in entries],
                    )
                )
            return EXIT_OK if entries else EXIT_NOTHING
        if args.action == "add":
            added = repo.suppression_add(args.address, args.by, args.reason)
            print(f"{'suppressed' if added else 'already suppressed'}: {args.address}")
            return EXIT_OK if added else EXIT_NOTHING
        removed = repo.suppression_remove(args.address, args.by, args.reason)
        print(f"{'removed' if removed else 'not on the list'}: {args.address}")
        return EXIT_OK if removed else EXIT_NOTHING


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("suppression", help="addresses never handed to SES (bounces, complaints, by hand)")
    actions = p.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every suppressed address")
    add_dsn(listing)
    listing.add_argument("--limit", type=int, default=10_000)
    listing.add_argument("--json", action="store_true")
    for name, verb in (("add", "suppress"), ("remove", "stop suppressing")):
        change = actions.add_parser(name, help=f"{verb} an address")
        add_dsn(change)
        change.add_argument("address")
        change.add_argument("--by", required=True, help="your name, written to the log")
        change.add_argument("--reason", required=True, help="why, written to the log")
    p.set_defaults(func=cmd_suppression)
