"""The contract from other languages.

1. A client with no Python driver: plain CALL text through the mariadb/mysql CLI.
2. The examples of docs/procedures.md (docs/examples/: Python with the helper and with plain DB-API,
   Java/JDBC, Node/mysql2, Go/database/sql, PHP/PDO): the docs must show each file's docs:start ...
   docs:end part unchanged, and each example runs against the test database in every language whose
   toolchain and driver this machine has (SKIP with the reason otherwise), twice, and every stored
   field and attachment byte is compared with the document it builds. The run ends with a line
   naming the languages that ran and those skipped.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from email_outbox.db.dsn import DatabaseDsn
from email_outbox.db.repository import OutboxRepository
from email_outbox.models import Status
from email_outbox_devtools.localdb import LOCAL_SENDER_DOMAIN
from tests.conftest import OTHER_LANGUAGES
from tests.support.harness import TestServer


def _client() -> str:
    for name in ("mariadb", "mysql"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "neither the mariadb nor the mysql command-line client is installed (apt-get install mariadb-client)"
    )


def sql(dsn: DatabaseDsn, statements: str) -> list[list[str]]:
    """Run statements in one client session; return the rows of every result set (tab-separated, no headers)."""
    cmd = [_client(), "--batch", "--skip-column-names", f"--user={dsn.user}", dsn.database]
    if dsn.password:
        cmd.insert(1, f"--password={dsn.password}")
    cmd += (
        [f"--socket={dsn.unix_socket}"]
        if dsn.unix_socket
        else [f"--host={dsn.host}", f"--port={dsn.port}", "--protocol=TCP"]
    )
    out = subprocess.run(cmd, input=statements, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(out.stderr)
    return [line.split("\t") for line in out.stdout.splitlines()]


def test_enqueue_claim_finalize_requeue_through_the_cli(dsn: DatabaseDsn, repo: OutboxRepository) -> None:
    rows = sql(
        dsn,
        """
        START TRANSACTION;
        CALL email_enqueue('cli-1', 'a@example.com', NULL, 'From another language', 'body', NULL, 3, NULL);
        CALL email_enqueue('cli-1', 'a@example.com', NULL, 'From another language', 'body', NULL, 3, NULL);
        COMMIT;
        CALL email_enqueue('cli-2', 'b@example.com', 'shop@example.com', 'Second', NULL, '<p>x</p>', NULL, NULL);
    """,
    )
    (first_affected, first_id), (dup_affected, dup_id), (second_affected, second_id) = rows
    assert (first_affected, dup_affected, second_affected) == ("1", "0", "1")
    assert dup_id == first_id

    claimed = sql(dsn, "CALL email_claim_batch('tok-cli', 'go-service-1', 60, 10);")
    assert [r[0] for r in claimed] == [first_id, second_id]
    assert claimed[0][1:5] == ["cli-1", "a@example.com", "NULL", "From another language"]

    (sent,) = sql(dsn, f"CALL email_finalize_sent({first_id}, 'tok-cli', 'ses-123');")
    (stale,) = sql(dsn, f"CALL email_finalize_sent({first_id}, 'someone-else', 'ses-999');")
    (unknown,) = sql(dsn, f"CALL email_finalize_unknown({second_id}, 'tok-cli', 'read timeout');")
    (requeued,) = sql(dsn, f"CALL email_requeue_unknown_outcome({second_id}, 'dba-alice', 'not in SES');")
    assert (sent, stale, unknown, requeued) == (["1"], ["0"], ["1"], ["1"])

    assert repo.get_row(int(first_id)).status is Status.SENT
    assert repo.get_row(int(first_id)).provider_message_id == "ses-123"
    assert repo.get_row(int(second_id)).status is Status.PENDING
    assert repo.events(int(second_id))[-1].actor == "dba-alice"

    stats = {r[0]: int(r[1]) for r in sql(dsn, "CALL email_outbox_stats();")}
    assert stats == {
        "Pending": 1,
        "Retrying": 0,
        "Processing": 0,
        "Sent": 1,
        "Failed": 0,
        "UnknownOutcome": 0,
    }


def test_cli_sees_the_typed_error(dsn: DatabaseDsn) -> None:
    with pytest.raises(AssertionError, match=r"ERROR 45003 \(45000\).*email_enqueue: to_address"):
        sql(dsn, "CALL email_enqueue('bad', 'not-an-address', NULL, 's', 'b', NULL, NULL, NULL);")


# --- the examples of docs/procedures.md, run in every language this machine has -----------------
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "examples"
PDF = b"%PDF-1.4\n" + bytes(range(256)) * 3 + b"\n%%EOF\n"  # every byte value
LANGUAGES = ("python-helper", "python-dbapi", "java", "node", "go", "php")
# The examples that name a tenant and catch tenant_not_allowed by its number.
TENANT_LANGUAGES = ("java", "node", "go", "php")
GO_DRIVER = "github.com/go-sql-driver/mysql@v1.8.1"
GO_DRIVER_DEBIAN = "/usr/share/gocode/src/github.com/go-sql-driver/mysql"
NODE_DRIVER = "mysql2@3"
JARS = (
    Path("/usr/share/java/mariadb-java-client.jar"),
    Path("/usr/share/java/javax.json-api.jar"),
    Path("/usr/share/java/javax.json.jar"),
)


def regions(path: Path) -> dict[str, str]:
    """The parts of an example file between `docs:start [name]` and `docs:end` lines, by name."""
    found: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        marker = line.strip().lstrip("/#").strip()
        if marker.startswith("docs:start"):
            name, lines = marker.removeprefix("docs:start").strip(), []
        elif marker == "docs:end" and name is not None:
            found[name] = textwrap.dedent("\n".join(lines)).strip("\n") + "\n"
            name = None
        elif name is not None:
            lines.append(line)
    return found


DOC_BLOCKS = [
    ("python", EXAMPLES / "enqueue.py", "helper"),
    ("python", EXAMPLES / "enqueue.py", "dbapi"),
    ("java", EXAMPLES / "Enqueue.java", ""),
    ("go", EXAMPLES / "enqueue.go", ""),
    ("javascript", EXAMPLES / "enqueue.js", ""),
    ("javascript", EXAMPLES / "worker.js", ""),
    ("php", EXAMPLES / "enqueue.php", ""),
]


@pytest.mark.parametrize(
    ("fence", "path", "name"), DOC_BLOCKS, ids=[f"{p.name}:{n}" for _, p, n in DOC_BLOCKS]
)
def test_the_docs_show_the_example_files_unchanged(fence: str, path: Path, name: str) -> None:
    """docs/procedures.md shows each example exactly as the file the next test runs."""
    region = regions(path).get(name)
    assert region, f"{path} has no docs:start {name} ... docs:end region"
    docs = (ROOT / "docs" / "procedures.md").read_text(encoding="utf-8")
    assert f"```{fence}\n{region}```\n" in docs, (
        f"docs/procedures.md must show {path.relative_to(ROOT)} ({name or 'its region'}) verbatim "
        f"in a ```{fence} block:\n{region}"
    )


@pytest.fixture
def outcomes(request: pytest.FixtureRequest) -> dict[str, str]:
    """Which languages ran and which were skipped, and why: conftest prints them at the end."""
    return request.config.stash.setdefault(OTHER_LANGUAGES, {})


def _skip(outcomes: dict[str, str], language: str, reason: str) -> NoReturn:
    outcomes[language] = f"SKIP: {reason}"
    pytest.skip(f"SKIP {language}: {reason}")


def _run(cmd: list[str], timeout: float = 300, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def _cache_dir(name: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "email-outbox-tests" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def _node_env(outcomes: dict[str, str], language: str) -> dict[str, str]:
    """NODE_PATH holding mysql2 (installed once into the test cache); skips, saying why, without node."""
    if not (shutil.which("node") and shutil.which("npm")):
        _skip(outcomes, language, "no node/npm on PATH")
    modules = _cache_dir("node")
    if not (modules / "node_modules" / "mysql2" / "package.json").exists():
        out = _run(
            ["npm", "install", "--prefix", str(modules), "--no-audit", "--no-fund", NODE_DRIVER],
            timeout=240,
        )
        if out.returncode != 0:
            _skip(
                outcomes,
                language,
                f"npm could not install {NODE_DRIVER} (offline?): {out.stderr.strip()[-300:]}",
            )
    return {"NODE_PATH": str(modules / "node_modules")}


def _command(language: str, build: Path, outcomes: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The command that runs this language's example (built in `build`), and extra environment;
    skips, saying why, when this machine lacks the toolchain or the driver."""
    if language.startswith("python"):
        way = language.removeprefix("python-")
        path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
        return [sys.executable, str(EXAMPLES / "enqueue.py"), "{order}", "{pdf}", way], {"PYTHONPATH": path}
    if language == "java":
        if not (shutil.which("javac") and shutil.which("java")):
            _skip(
                outcomes,
                language,
                "no javac/java on PATH (install a JDK, e.g. Debian's default-jdk-headless)",
            )
        missing = [str(jar) for jar in JARS if not jar.exists()]
        if missing:
            _skip(
                outcomes,
                language,
                f"{', '.join(missing)} absent: db/ensure-server-binary.sh installs libmariadb-java and libjsonp-java",
            )
        classpath = os.pathsep.join([str(build), *map(str, JARS)])
        out = _run(
            [
                "javac",
                "-encoding",
                "UTF-8",
                "-cp",
                classpath,
                "-d",
                str(build),
                str(EXAMPLES / "Enqueue.java"),
            ]
        )
        assert out.returncode == 0, f"docs/examples/Enqueue.java does not compile:\n{out.stderr}"
        return ["java", "-cp", classpath, "Enqueue", "{order}", "{pdf}"], {}
    if language == "node":
        return ["node", str(EXAMPLES / "enqueue.js"), "{order}", "{pdf}"], _node_env(outcomes, language)
    if language == "go":
        if not shutil.which("go"):
            _skip(
                outcomes,
                language,
                "no go toolchain on PATH (install Go 1.19+ to run docs/examples/enqueue.go)",
            )
        module = build / "go"
        module.mkdir()
        shutil.copy(EXAMPLES / "enqueue.go", module / "main.go")
        go_env = {
            "GOCACHE": str(_cache_dir("go-build")),
            "GOMODCACHE": str(_cache_dir("go-mod")),
            "GOFLAGS": "-mod=mod",
        }
        env = {**os.environ, **go_env}
        assert _run(["go", "mod", "init", "example.com/enqueue"], cwd=module, env=env).returncode == 0
        fetched = _run(["go", "get", GO_DRIVER], cwd=module, env=env)
        if fetched.returncode != 0:
            # Offline: the driver's source from Debian (golang-github-go-sql-driver-mysql-dev) or GO_MYSQL_DIR.
            local = Path(os.environ.get("GO_MYSQL_DIR") or GO_DRIVER_DEBIAN)
            if not (local / "go.mod").exists():
                _skip(
                    outcomes,
                    language,
                    f"go could not fetch {GO_DRIVER} ({fetched.stderr.strip()[-200:]}) and {local} is absent"
                    " (apt-get install golang-github-go-sql-driver-mysql-dev, or set GO_MYSQL_DIR)",
                )
            with (module / "go.mod").open("a") as mod:
                mod.write(
                    f"\nrequire {GO_DRIVER.replace('@', ' ')}\nreplace {GO_DRIVER.split('@')[0]} => {local}\n"
                )
            env["GOPROXY"] = "off"
        out = _run(["go", "build", "-o", str(build / "enqueue"), "."], cwd=module, env=env)
        assert out.returncode == 0, f"docs/examples/enqueue.go does not build:\n{out.stderr}"
        return [str(build / "enqueue"), "{order}", "{pdf}"], {}
    assert language == "php", language
    if not shutil.which("php"):
        _skip(
            outcomes,
            language,
            "no php on PATH (install php-cli and php-mysql to run docs/examples/enqueue.php)",
        )
    modules = _run(["php", "-m"]).stdout.split()
    if "pdo_mysql" not in modules:
        _skip(outcomes, language, "php has no pdo_mysql extension (install php-mysql)")
    return ["php", str(EXAMPLES / "enqueue.php"), "{order}", "{pdf}"], {}


@pytest.fixture
def orders(dsn: DatabaseDsn, server: TestServer) -> Iterator[Any]:
    """The business table the examples change in the same transaction as the enqueue."""
    conn = server.admin_connection(dsn.database)
    cur = conn.cursor()
    cur.execute("DROP TABLE IF EXISTS orders")
    cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, state VARCHAR(20) NOT NULL) ENGINE=InnoDB")
    try:
        yield conn
    finally:
        cur.execute("DROP TABLE IF EXISTS orders")
        conn.close()


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_docs_example_enqueues_inside_the_callers_transaction(
    language: str,
    dsn: DatabaseDsn,
    repo: OutboxRepository,
    orders: Any,
    tmp_path: Path,
    outcomes: dict[str, str],
) -> None:
    """Runs docs/examples/<language> against the test database, twice, and compares what is stored
    with the document the example builds: every address, header, tag and attachment byte. Then once
    more with its sender taken off the allow-list: the example matches the refusal's number (45005,
    sender_not_allowed) and exits 3, and the refusal rolls the order's change back too."""
    command, extra_env = _command(language, tmp_path, outcomes)
    order = LANGUAGES.index(language) + 40
    orders.cursor().execute("INSERT INTO orders VALUES (%s, 'new')", (order,))
    pdf = tmp_path / "receipt.pdf"
    pdf.write_bytes(PDF)
    env = {
        **os.environ,
        **extra_env,
        "OUTBOX_DB_HOST": dsn.host,
        "OUTBOX_DB_PORT": str(dsn.port),
        "OUTBOX_DB_USER": dsn.user,
        "OUTBOX_DB_PASSWORD": dsn.password,
        "OUTBOX_DB_NAME": dsn.database,
    }
    argv = [arg.format(order=order, pdf=pdf) for arg in command]
    # The Java, Node, Go and PHP examples send for the tenant `shop` (docs/procedures.md, Tenants).
    repo.tenant_add("shop", {"accounts": ["*"]}, "test", "the examples' service")
    answers = []
    for _ in range(2):
        out = _run(argv, timeout=120, env=env)
        assert out.returncode == 0, f"{language} example failed:\n{out.stdout}\n{out.stderr}"
        answers.append(out.stdout.split())
    (first_affected, attempt_id), (again_affected, again_id) = answers
    assert (first_affected, again_affected) == ("1", "0") and again_id == attempt_id, answers

    cur = orders.cursor()
    cur.execute("SELECT state FROM orders WHERE id = %s", (order,))
    assert cur.fetchall() == [("paid",)], "the business change committed with the enqueue"
    row = repo._select(
        "SELECT notification_id, to_address, from_address, subject, text_body, html_body, message_options,"
        " attachment_bytes FROM email_delivery_attempts WHERE id = %s",
        (int(attempt_id),),
    )[0]
    assert row["notification_id"] == f"order-{order}:receipt"
    assert (row["to_address"], row["from_address"]) == ("ann@example.com", "shop@example.com")
    assert row["subject"] == f"Your receipt for order {order} 🧾", "a 4-byte character arrives as itself"
    assert row["text_body"] == "Thank you for your order. The receipt is attached."
    assert row["html_body"] == "<p>Thank you for your order. The receipt is attached.</p>"
    assert row["attachment_bytes"] == len(PDF)
    options = json.loads(row["message_options"])
    assert options == {
        "from": "Shop <shop@example.com>",
        "to": ["Ann Lee <ann@example.com>"],
        "cc": ["accounts@example.com"],
        "reply_to": ["Support <help@example.com>"],
        "headers": {
            "List-Unsubscribe": "<https://example.com/unsubscribe/ann>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
        "tags": {"kind": "receipt"},
        "attachment_count": 1,
    }
    attachments = repo._select(
        "SELECT position, filename, content_type, disposition, content_id, content FROM email_attachments"
        " WHERE attempt_id = %s",
        (int(attempt_id),),
    )
    assert [{**a, "content": bytes(a["content"])} for a in attachments] == [
        {
            "position": 0,
            "filename": f"receipt-{order}.pdf",
            "content_type": "application/pdf",
            "disposition": "attachment",
            "content_id": None,
            "content": PDF,
        }
    ], "every byte of the attachment"
    assert sum(s.count for s in repo.outbox_stats()) == 1, "the second run was a duplicate: one row"

    # A refusal (45000, errno 45005) rolls the business change back with it: the example's own error path.
    refused = order + 100
    cur.execute("INSERT INTO orders VALUES (%s, 'new')", (refused,))
    assert repo.sender_remove(LOCAL_SENDER_DOMAIN, "", "test", "refuse the example's sender") == 1
    try:
        out = _run([arg.format(order=refused, pdf=pdf) for arg in command], timeout=120, env=env)
    finally:
        repo.sender_add(LOCAL_SENDER_DOMAIN, "", "test", "the local test sender domain again")
    # Exit 3 and "sender not allowed: ..." only from the branch that matched the refusal's number (45005).
    assert out.returncode == 3, f"{language} example did not match refusal 45005:\n{out.stdout}\n{out.stderr}"
    assert "sender not allowed: " in out.stderr and "is not an allowed sender" in out.stderr, out.stderr
    cur.execute("SELECT state FROM orders WHERE id = %s", (refused,))
    assert cur.fetchall() == [("new",)], "the refused enqueue rolled the business change back"
    assert sum(s.count for s in repo.outbox_stats()) == 1, "and wrote nothing"
    if language in TENANT_LANGUAGES:
        assert repo.get_row(int(attempt_id)).tenant == "shop"
        # A tenant the account may not use (45012, tenant_not_allowed): caught by its number, exit 4.
        assert repo.tenant_set("shop", {"accounts": ["someone_else"]}, "test", "not this account's") == 1
        out = _run([arg.format(order=refused, pdf=pdf) for arg in command], timeout=120, env=env)
        assert out.returncode == 4, (
            f"{language} example did not match refusal 45012:\n{out.stdout}\n{out.stderr}"
        )
        assert (
            "tenant not allowed: " in out.stderr
            and "tenant shop is not one this account may use" in out.stderr
        )
        cur.execute("SELECT state FROM orders WHERE id = %s", (refused,))
        assert cur.fetchall() == [("new",)] and sum(s.count for s in repo.outbox_stats()) == 1
    outcomes[language] = "ran"


# --- a worker in another language, written from docs/procedures.md alone --------------------------
WORKER_PDF = b"%PDF-1.4\n" + bytes(range(255, -1, -1)) * 2 + b"\n%%EOF\n"


def test_a_node_worker_built_from_the_docs_sends_the_whole_message(
    dsn: DatabaseDsn, repo: OutboxRepository, tmp_path: Path, outcomes: dict[str, str]
) -> None:
    """docs/examples/worker.js claims with email_claim_batch, loads attachments, sends through SESv2
    SendEmail (signed) to the local SES endpoint and finalizes. The endpoint must receive every
    recipient (to, cc, bcc; a cc suppressed since the enqueue left out), reply-to, header, tag and
    attachment byte; a plain email_enqueue row goes to its one address; both rows end Sent with the
    MessageId the endpoint gave."""
    from email_outbox import Attachment, Message, enqueue_message
    from email_outbox_devtools.ses_endpoint import SesEndpoint

    env = {**os.environ, **_node_env(outcomes, "node worker")}
    whole = enqueue_message(
        repo.connection,
        "node-worker:whole",
        Message(
            sender="Shop <shop@example.com>",
            to=["Ann Lee <ann@example.com>"],
            cc=["accounts@example.com", '"Lee, Carl" <carl@example.com>'],
            bcc=["audit@example.com"],
            reply_to=["Support <help@example.com>"],
            subject="Invoice 42 🧾",
            text="The invoice is attached.",
            html="<p>The invoice is attached.</p>",
            headers={"X-Order": "42"},
            tags={"kind": "invoice"},
            attachments=[Attachment("invoice-42.pdf", "application/pdf", WORKER_PDF)],
        ),
    ).attempt_id
    plain = repo.enqueue("node-worker:plain", "bob@example.com", "Plain", text_body="Hi Bob").attempt_id
    repo.suppression_add("carl@example.com", "ops", "complained after the enqueue")

    with SesEndpoint() as endpoint:
        out = _run(
            ["node", str(EXAMPLES / "worker.js")],
            timeout=120,
            env={
                **env,
                "OUTBOX_DB_HOST": dsn.host,
                "OUTBOX_DB_PORT": str(dsn.port),
                "OUTBOX_DB_USER": dsn.user,
                "OUTBOX_DB_PASSWORD": dsn.password,
                "OUTBOX_DB_NAME": dsn.database,
                "OUTBOX_SES_ENDPOINT": endpoint.url,
                "OUTBOX_DEFAULT_FROM": f"outbox@{LOCAL_SENDER_DOMAIN}",
                "AWS_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
                "AWS_SECRET_ACCESS_KEY": "example-secret",
            },
        )
        assert out.returncode == 0, f"the Node worker failed:\n{out.stdout}\n{out.stderr}"
        accepted = {m.outbox_id: m for m in endpoint.accepted()}

    printed = {
        int(i): (status, message_id)
        for i, status, message_id in (line.split() for line in out.stdout.splitlines())
    }
    assert set(printed) == {whole, plain}, out.stdout
    for attempt_id in (whole, plain):
        row = repo.get_row(attempt_id)
        assert row.status is Status.SENT, (attempt_id, row.status, row.last_error_message)
        assert printed[attempt_id] == ("Sent", row.provider_message_id)
        assert accepted[str(attempt_id)].message_id == row.provider_message_id

    request = accepted[str(whole)].request
    assert request["Destination"] == {
        "ToAddresses": ['"Ann Lee" <ann@example.com>'],
        "CcAddresses": ["accounts@example.com"],
        "BccAddresses": ["audit@example.com"],
    }, "every recipient but the cc suppressed since the enqueue"
    assert request["FromEmailAddress"] == '"Shop" <shop@example.com>'
    assert request["ReplyToAddresses"] == ['"Support" <help@example.com>']
    simple = request["Content"]["Simple"]
    assert simple["Subject"]["Data"] == "Invoice 42 🧾"
    assert simple["Body"]["Text"]["Data"] == "The invoice is attached."
    assert simple["Body"]["Html"]["Data"] == "<p>The invoice is attached.</p>"
    assert simple["Headers"] == [{"Name": "X-Order", "Value": "42"}]
    (attachment,) = simple["Attachments"]
    assert base64.b64decode(attachment["RawContent"]) == WORKER_PDF, "every byte of the attachment"
    assert (attachment["FileName"], attachment["ContentType"]) == ("invoice-42.pdf", "application/pdf")
    assert {t["Name"]: t["Value"] for t in request["EmailTags"]} == {
        "kind": "invoice",
        "outbox_id": str(whole),
    }

    plain_request = accepted[str(plain)].request
    assert plain_request["Destination"] == {"ToAddresses": ["bob@example.com"]}
    assert plain_request["FromEmailAddress"] == f"outbox@{LOCAL_SENDER_DOMAIN}"
    assert plain_request["Content"]["Simple"]["Body"] == {"Text": {"Data": "Hi Bob", "Charset": "UTF-8"}}
    outcomes["node worker"] = "ran"
