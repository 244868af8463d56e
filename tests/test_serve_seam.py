"""The ``serve`` seam: address parsing, endpoint lookup, and SCRAM secrets for the endpoints' auth."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest

import changefeed
from changefeed.engine.auth import ScramSecret, make_scram_secret, password_option, scram_secret, user_exists
from changefeed.exceptions import InvalidOption
from changefeed.server import EndpointConfig, create_endpoint, parse_address


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:5432", ("127.0.0.1", 5432)),
        (":26257", ("127.0.0.1", 26257)),
        ("9092", ("127.0.0.1", 9092)),
        ("localhost", ("localhost", 1)),
        ("[::1]:8081", ("::1", 8081)),
        ("[::1]", ("::1", 1)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text, 1) == expected


@pytest.mark.parametrize("text", ["host:port", "h:70000", "[::1", "h:-1"])
def test_parse_address_errors(text: str) -> None:
    with pytest.raises(InvalidOption, match="invalid address"):
        parse_address(text, 1)


def test_unknown_endpoint(tmp_path: Path) -> None:
    with pytest.raises(InvalidOption, match="unknown endpoint"):
        create_endpoint("smtp", EndpointConfig(db=tmp_path))


def test_scram_secret_matches_rfc7677() -> None:
    # RFC 7677's example: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 rounds.
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    secret = make_scram_secret("pencil", salt=salt, iterations=4096)
    client_first_bare = b"n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final_bare = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth_message = client_first_bare + b"," + server_first + b"," + client_final_bare
    signature = hmac.digest(secret.stored_key, auth_message, "sha256")
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == secret.stored_key
    server_signature = hmac.digest(secret.server_key, auth_message, "sha256")
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert ScramSecret.parse(secret.text()) == secret


def test_passwords_are_stored_as_secrets(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE USER alice WITH PASSWORD 'secret'")
        conn.execute("CREATE USER bob")
        raw = conn.db.conn.execute("SELECT options FROM _users WHERE name = 'alice'").fetchone()[0]
        assert "secret" not in raw.replace("SCRAM-SHA-256", "")
        secret = scram_secret(conn.db.conn, "alice")
        assert secret is not None
        assert make_scram_secret("secret", salt=secret.salt, iterations=secret.iterations) == secret
        assert scram_secret(conn.db.conn, "bob") is None
        assert user_exists(conn.db.conn, "bob") and user_exists(conn.db.conn, "root")
        assert not user_exists(conn.db.conn, "carol")
    assert password_option(None) is None
    kept = make_scram_secret("x").text()
    assert password_option(kept) == kept
