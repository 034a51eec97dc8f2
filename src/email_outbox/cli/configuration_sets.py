"""`email-outbox configuration-sets list|add|remove`: the SES configuration sets a message may name.

A message's `configuration_set` replaces the worker's for that send, so a set with no event
destination would hide its bounces and complaints from the suppression list: only the sets on this
list may be named. Every change goes through a procedure that logs who, from which database account,
when and why, in email_allowed_configuration_sets_log.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, open_repository
from email_outbox.display import print_json, tab_separated


def cmd_configuration_sets(args: argparse.Namespace) -> int:
    with open_repository(args) as repo:
        if args.action == "list":
            sets = repo.allowed_configuration_sets()
            if args.json:
                print_json([asdict(s) for s in sets])
            for s in [] if args.json else sets:
                print(tab_separated((s.name, f"{s.added_at:%Y-%m-%d %H:%M} UTC", s.added_by, s.reason)))
            return EXIT_OK if sets else EXIT_NOTHING
        if args.action == "add":
            added = repo.configuration_set_add(args.name, args.by, args.reason)
            print(f"{'allowed' if added else 'already allowed'}: {args.name}")
            return EXIT_OK if added else EXIT_NOTHING
        removed = repo.configuration_set_remove(args.name, args.by, args.reason)
        print(f"{'removed' if removed else 'not on the list'}: {args.name}")
        return EXIT_OK if removed else EXIT_NOTHING


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("configuration-sets", help="the SES configuration sets a message may name")
    actions = p.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="every configuration set a message may name")
    add_dsn(listing)
    listing.add_argument("--json", action="store_true")
    for name, verb in (("add", "allow messages to name"), ("remove", "stop allowing messages to name")):
        change = actions.add_parser(name, help=f"{verb} a configuration set")
        add_dsn(change)
        change.add_argument("name", help="the configuration set's name, as in SES")
        change.add_argument("--by", required=True, help="your name, written to the log")
        change.add_argument("--reason", required=True, help="why, written to the log")
    p.set_defaults(func=cmd_configuration_sets)
