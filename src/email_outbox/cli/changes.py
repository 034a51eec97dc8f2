"""`email-outbox changes`: the feed of what happened to the calling account's emails, one JSON object a
line (email_changes; docs/frameworks.md, "A feed of what happened").

Each line carries its `cursor`; pass the last one printed as --after to continue where a run stopped:
nothing is missed and nothing is printed twice. With --follow it keeps reading until interrupted.
"""

from __future__ import annotations

import argparse
import json

from email_outbox.changes import MAX_ROWS, changes
from email_outbox.cli.common import EXIT_OK, add_dsn, open_repository
from email_outbox.errors import InvalidInput


def cmd_changes(args: argparse.Namespace) -> int:
    if not 1 <= args.max_rows <= MAX_ROWS:
        raise InvalidInput(f"--max-rows must be 1 to {MAX_ROWS}")
    if args.after < 0:
        raise InvalidInput("--after must be 0 (from the start) or a cursor a change carried")
    with open_repository(args) as repo:
        for change in changes(
            repo.connection, args.after, args.max_rows, follow=args.follow, poll_interval=args.poll_interval
        ):
            print(json.dumps(change.document(), ensure_ascii=False), flush=True)
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("changes", help="the feed of status changes and SES events of this account's emails")
    add_dsn(p)
    p.add_argument("--after", type=int, default=0, help="the cursor to continue after (0: from the start)")
    p.add_argument("--max-rows", type=int, default=100, help=f"changes per call, 1 to {MAX_ROWS}")
    p.add_argument("--follow", action="store_true", help="keep reading new changes until interrupted")
    p.add_argument("--poll-interval", type=float, default=1.0, help="seconds between reads when caught up")
    p.set_defaults(func=cmd_changes)
