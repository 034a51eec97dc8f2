"""`email-outbox grant ROLE ACCOUNT`: the least-privilege roles of email_outbox.schema.grants, given to an
account. It never creates an account by accident, and a new account's password never sits in argv."""

from __future__ import annotations

import argparse
import getpass
import os
import sys

from email_outbox.cli.common import EXIT_OK, add_dsn, dsn_from, open_repository
from email_outbox.db.connection import DRIVER_ERRORS, translate_error
from email_outbox.errors import InvalidInput
from email_outbox.schema.grants import ROLES


def _new_account_password(args: argparse.Namespace, account: object) -> str:
    """The password for `grant --create`: from stdin, an environment variable or a prompt; never argv."""
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif args.password_env:
        if args.password_env not in os.environ:
            raise InvalidInput(f"--password-env {args.password_env}: that variable is not set")
        password = os.environ[args.password_env]
    elif sys.stdin.isatty():
        password = getpass.getpass(f"password for {account}: ")
    else:
        raise InvalidInput("--create needs a password: --password-stdin, --password-env VAR, or a terminal")
    if not password:
        raise InvalidInput("refusing to create an account with an empty password")
    return password


def cmd_grant(args: argparse.Namespace) -> int:
    from email_outbox.schema.grants import Account, apply_grants, grant_statements

    account = Account.parse(args.account)
    if not args.create and (args.password_env or args.password_stdin):
        raise InvalidInput("--password-env and --password-stdin only go with --create")
    dsn = dsn_from(args)
    database = args.database or dsn.database
    if args.print_only:
        for statement in grant_statements(args.role, account, database):
            print(statement + ";")
        return EXIT_OK
    password = _new_account_password(args, account) if args.create else None
    with open_repository(args) as repo:
        cursor = repo.connection.cursor()
        try:
            for statement in apply_grants(cursor, args.role, account, database, create_password=password):
                print(statement)
        except DRIVER_ERRORS as exc:
            raise translate_error(exc) from exc
        finally:
            cursor.close()
    print(f"{account} now has the {args.role} role on {database}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "grant", help="give an account the enqueuer, worker, operator, events, viewer or console role"
    )
    add_dsn(p)
    p.add_argument("role", choices=list(ROLES))
    p.add_argument("account", help="user or user@host (host defaults to %%)")
    p.add_argument("--database", help="the outbox database (default: the DSN's)")
    p.add_argument("--create", action="store_true", help="create the account (refused if it exists)")
    p.add_argument("--password-env", help="with --create: read the password from this variable")
    p.add_argument(
        "--password-stdin",
        action="store_true",
        help="with --create: read the password from stdin's first line",
    )
    p.add_argument("--print", dest="print_only", action="store_true", help="print the GRANTs, run nothing")
    p.set_defaults(func=cmd_grant)
