"""A webhook test endpoint: HTTPS with a CA made at test time (``cryptography``), recording every
request body; it can be told to fail (HTTP 500) or stall past the client's time-out on a share
of requests."""

from __future__ import annotations

import base64
import datetime as dt
import gzip
import http.server
import random
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class TestCA:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_b64(self) -> str:
        return base64.b64encode(self.ca_pem).decode()


def make_ca() -> TestCA:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "changefeed test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return TestCA(
        ca.public_bytes(serialization.Encoding.PEM),
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


@dataclass
class Endpoint:
    port: int
    bodies: list[bytes] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail_share: float = 0.0
    stall_s: float = 0.0
    delay_s: float = 0.0  # before every successful answer
    rng: random.Random = field(default_factory=lambda: random.Random(1))
    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: int = 0


def serve(ca: TestCA, tmp: Path) -> tuple[http.server.ThreadingHTTPServer, Endpoint]:
    cert, key = tmp / "server.pem", tmp / "server.key"
    cert.write_bytes(ca.cert_pem)
    key.write_bytes(ca.key_pem)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(cert), str(key))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            ep: Endpoint = self.server.endpoint  # type: ignore[attr-defined]
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            if len(body) < length:  # the client gave up mid-request (its time-out): nothing arrived
                self.close_connection = True
                return
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with ep.lock:
                roll = ep.rng.random()
            if roll < ep.fail_share / 2:
                with ep.lock:
                    ep.failures += 1
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if roll < ep.fail_share:
                with ep.lock:
                    ep.failures += 1
                time.sleep(ep.stall_s)  # past the client's time-out: it gives up and retries
                self.close_connection = True
                return
            time.sleep(ep.delay_s)
            with ep.lock:
                ep.bodies.append(body)
                ep.headers.append(dict(self.headers.items()))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    ep = Endpoint(srv.server_address[1])
    srv.endpoint = ep  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, ep
