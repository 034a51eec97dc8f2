"""The SES client against a real TLS listener on loopback, with the real boto3 client and the lean one
alike: only a failure that proves the request never left may be retried or failed; anything after it
may have left is ambiguous."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from email_outbox.models import ClaimedEmail
from email_outbox.ses.classify import Outcome
from email_outbox.ses.sender import SesSender, make_send_client
from email_outbox.worker.config import load_config
from tests.support.ses_clients import CLIENT_KINDS, ses_client

EMAIL = ClaimedEmail(1, "n-1", "user@example.com", "sender@example.com", "s", "hello", None, 0, 5)


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


class CorruptingListener:
    """Accepts TLS connections; reads each whole HTTP request, then answers with a TLS record that does
    not decrypt and drops the connection, as a broken proxy or a cut link in between would."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                raw, _ = self.sock.accept()
            except OSError:
                return
            try:
                conn = self.context.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError):
                raw.close()  # the client refused the handshake: no request came
                continue
            try:
                self.requests.append(_read_request(conn))
                # Past TLS, straight onto the TCP stream: an application-data record that does not
                # decrypt (a corrupted answer). The client's TLS layer fails reading it: an SSLError.
                socket.socket.sendall(conn, b"\x17\x03\x03\x00\x40" + b"\x00" * 64)
                conn.shutdown(socket.SHUT_RDWR)  # a TCP close only: SSLSocket.shutdown sends no close_notify
            except OSError:
                pass
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()


def _read_request(conn: ssl.SSLSocket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )  # fmt: skip
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.fixture(params=CLIENT_KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[CorruptingListener, Path]]:
    cert, key = self_signed(tmp_path)
    server = CorruptingListener(cert, key)
    yield server, cert
    server.close()


def sender(kind: str, port: int, verify: str | bool) -> SesSender:
    config = load_config({}, {"EMAIL_OUTBOX_DSN": "mysql://u:p@127.0.0.1:3306/db"})
    return SesSender(config, ses_client(kind, f"https://127.0.0.1:{port}", verify=verify))


def test_a_refused_certificate_proves_the_request_never_left_and_is_retried(
    listener: tuple[CorruptingListener, Path], kind: str
) -> None:
    server, _ = listener
    decision = sender(kind, server.port, verify=True).send(
        EMAIL
    )  # the system trust store: self-signed refused
    assert (decision.outcome, decision.error_code) == (Outcome.TRANSIENT, "TLSCertificateRejected")
    assert server.requests == []


def test_a_tls_failure_after_the_request_left_is_ambiguous_never_retried(
    listener: tuple[CorruptingListener, Path], kind: str
) -> None:
    server, cert = listener
    decision = sender(kind, server.port, verify=str(cert)).send(EMAIL)
    assert len(server.requests) == 1 and b"user@example.com" in server.requests[0], "the request went out"
    assert decision.outcome is Outcome.AMBIGUOUS, decision


def test_a_stored_message_that_cannot_be_made_into_a_request_fails_and_is_never_sent(
    listener: tuple[CorruptingListener, Path], kind: str
) -> None:
    """It used to raise out of the send slot: the started row was left for the sweep to make
    UnknownOutcome, though no request had left."""
    server, cert = listener
    broken = ClaimedEmail(
        2, "n-2", "user@example.com", "sender@example.com", "s", "hi", None, 0, 5, message_options="{not json"
    )
    decision = sender(kind, server.port, verify=str(cert)).send(broken)
    assert (decision.outcome, decision.error_code) == (Outcome.PERMANENT, "MessageNotBuildable")
    assert server.requests == []


def test_aws_ca_bundle_and_aws_endpoint_url_sesv2_reach_the_client_the_setting_picks(
    listener: tuple[CorruptingListener, Path], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own client (make_send_client), configured only by the environment: without the
    CA bundle the self-signed listener is refused before any request; with AWS_CA_BUNDLE it is trusted
    and the request goes out."""
    server, cert = listener
    for name, value in {
        "AWS_ENDPOINT_URL_SESV2": f"https://127.0.0.1:{server.port}", "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
    }.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    config = load_config({"ses_client": kind}, {"EMAIL_OUTBOX_DSN": "mysql://u:p@127.0.0.1:3306/db"})
    refused = SesSender(config, make_send_client(config)).send(EMAIL)
    assert (refused.outcome, refused.error_code, server.requests) == (
        Outcome.TRANSIENT,
        "TLSCertificateRejected",
        [],
    )
    monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
    trusted = SesSender(config, make_send_client(config)).send(EMAIL)
    assert trusted.outcome is Outcome.AMBIGUOUS and len(server.requests) == 1
