"""`email-outbox console` (the operator web console) and `email-outbox console-user` (its users file).

Authentication is required: `--users-file` (HTTP Basic against scrypt hashes), or
`--trusted-user-header` from `--trusted-proxy` networks only; `--insecure-no-auth` on loopback only.
"""

from __future__ import annotations

import argparse
import getpass
import ipaddress
import sys
from urllib.parse import urlsplit

from email_outbox.cli.common import EXIT_NOTHING, EXIT_OK, add_dsn, dsn_from
from email_outbox.errors import ConfigError, InvalidInput


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--listen takes HOST:PORT (got {text!r})")
    return host.strip("[]") or "127.0.0.1", int(port)


def loopback_hosts(port: int, public_origins: frozenset[str]) -> frozenset[str]:
    """The Host headers a console on a loopback address answers: its own names, and a TLS proxy's
    public origins. Any other name reaching it is a DNS rebinding, or a mistake."""
    own = {f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")}
    return frozenset(own | {urlsplit(origin).netloc for origin in public_origins})


def build_settings(args: argparse.Namespace) -> tuple[object, str, int]:
    """The console's settings from the command line, refusing every unsafe combination."""
    from email_outbox.console.app import ConsoleSettings
    from email_outbox.console.auth import Authenticator, BasicAuth, NoAuth, TrustedHeader, is_loopback
    from email_outbox.console.pool import ConsoleDatabase
    from email_outbox.console.users import UsersFile, world_readable

    host, port = parse_listen(args.listen)
    modes = [bool(args.users_file), bool(args.trusted_user_header), bool(args.insecure_no_auth)]
    if sum(modes) == 0:
        raise ConfigError(
            "authentication is required: pass --users-file PATH (create users with `email-outbox console-user"
            " add NAME --users-file PATH`), or --trusted-user-header NAME with --trusted-proxy CIDR;"
            " --insecure-no-auth runs without it, on a loopback address only"
        )
    if sum(modes) > 1:
        raise ConfigError("choose one of --users-file, --trusted-user-header and --insecure-no-auth")
    if args.trusted_proxy and args.insecure_no_auth:
        raise ConfigError("--trusted-proxy goes with --users-file or --trusted-user-header")
    try:
        proxies = [ipaddress.ip_network(c, strict=False) for c in args.trusted_proxy or ()]
    except ValueError as exc:
        raise ConfigError(f"--trusted-proxy: {exc}") from None
    authenticator: Authenticator
    if args.users_file:
        users = UsersFile.load(args.users_file)
        if world_readable(users.path):
            print(f"warning: {users.path} can be read by other users: chmod 600 it", file=sys.stderr)
        origins = args.public_origin or ()
        behind_tls = bool(origins) and all(o.lower().startswith("https://") for o in origins)
        if not is_loopback(host) and not behind_tls and not args.insecure_plain_http:
            raise ConfigError(
                f"HTTP Basic on {host} would send each password in clear: serve the console through a TLS"
                " proxy and name its address with --public-origin https://..., or pass --insecure-plain-http"
            )
        authenticator = BasicAuth(users)
    elif args.trusted_user_header:
        if not args.trusted_proxy:
            raise ConfigError(
                "--trusted-user-header needs --trusted-proxy CIDR: the header is honoured only from the proxy"
            )
        authenticator = TrustedHeader(args.trusted_user_header, proxies)
    else:
        if not is_loopback(host):
            raise ConfigError(
                f"--insecure-no-auth listens on a loopback address only (127.0.0.1, ::1), not {host}"
            )
        authenticator = NoAuth()
    if not 0.1 <= args.statement_timeout <= 300:
        raise ConfigError("--statement-timeout must be 0.1 to 300 seconds")
    if not 1 <= args.bulk_cap <= 10_000:
        raise ConfigError("--bulk-cap must be 1 to 10000")
    database = ConsoleDatabase(dsn_from(args), statement_timeout_seconds=args.statement_timeout)
    database.start()
    public_origins = frozenset(o.rstrip("/").lower() for o in args.public_origin or ())
    settings = ConsoleSettings(
        database=database,
        authenticator=authenticator,
        read_only=args.read_only,
        public_origins=public_origins,
        allowed_hosts=loopback_hosts(port, public_origins) if is_loopback(host) else None,
        bulk_cap=args.bulk_cap,
        trusted_proxies=proxies,
    )
    return settings, host, port


def cmd_console(args: argparse.Namespace) -> int:
    import uvicorn

    from email_outbox.console.app import create_app

    settings, host, port = build_settings(args)
    app = create_app(settings)  # type: ignore[arg-type]
    mode = "read-only" if not settings.can_act else "operator"  # type: ignore[attr-defined]
    print(f"email-outbox console on http://{host}:{port}/ ({mode})", file=sys.stderr, flush=True)
    # proxy_headers off: the peer address is the TCP peer, which --trusted-proxy is checked against.
    uvicorn.run(
        app,
        host=host,
        port=port,
        proxy_headers=False,
        server_header=False,
        access_log=args.access_log,
        log_level="info",
    )
    return EXIT_OK


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin or not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            raise InvalidInput("the passwords differ")
    if not password:
        raise InvalidInput("refusing an empty password")
    return password


def cmd_console_user(args: argparse.Namespace) -> int:
    from email_outbox.console.users import add_user, check_user_name, remove_user

    check_user_name(args.name)
    if args.action == "add":
        replaced = add_user(args.users_file, args.name, _read_password(args))
        print(f"{'replaced' if replaced else 'added'} {args.name} in {args.users_file}")
        return EXIT_OK
    if remove_user(args.users_file, args.name):
        print(f"removed {args.name} from {args.users_file}")
        return EXIT_OK
    print(f"no user {args.name} in {args.users_file}", file=sys.stderr)
    return EXIT_NOTHING


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("console", help="the operator web console (authentication required)")
    add_dsn(p)
    p.add_argument("--listen", default="127.0.0.1:8025", help="HOST:PORT (default 127.0.0.1:8025)")
    p.add_argument("--users-file", help="HTTP Basic users, written by `email-outbox console-user add`")
    p.add_argument("--trusted-user-header", help="the user name header an SSO proxy sets (X-Forwarded-User)")
    p.add_argument(
        "--trusted-proxy",
        action="append",
        metavar="CIDR",
        help="the proxy's network (repeatable): --trusted-user-header is honoured from there only; with"
        " --users-file, failed logins count per client address it reports in X-Forwarded-For",
    )
    p.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="no authentication; refused unless --listen is loopback",
    )
    p.add_argument(
        "--insecure-plain-http",
        action="store_true",
        help="allow HTTP Basic beyond loopback with no https --public-origin (passwords in clear)",
    )
    p.add_argument(
        "--read-only", action="store_true", help="no requeue or resolve, whatever the account may do"
    )
    p.add_argument(
        "--public-origin",
        action="append",
        metavar="URL",
        help="the origin users reach the console at, when a proxy changes scheme or host (repeatable)",
    )
    p.add_argument(
        "--statement-timeout", type=float, default=5.0, help="seconds any one query may run (default 5)"
    )
    p.add_argument(
        "--bulk-cap", type=int, default=500, help="most emails one bulk action takes (default 500)"
    )
    p.add_argument("--access-log", action="store_true", help="log every request")
    p.set_defaults(func=cmd_console)

    p = sub.add_parser("console-user", help="add or remove a console user (password from stdin or a prompt)")
    p.add_argument("action", choices=["add", "remove"])
    p.add_argument("name")
    p.add_argument("--users-file", required=True)
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    p.set_defaults(func=cmd_console_user)
