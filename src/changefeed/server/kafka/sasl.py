"""SASL for the Kafka endpoint: PLAIN and SCRAM-SHA-256 against the database's users.

Passwords are checked against the users' SCRAM-SHA-256 secrets (``changefeed.engine.auth``):
PLAIN derives the stored key from the given password, SCRAM verifies the client proof (RFC 5802,
RFC 7677) and proves the server's knowledge of the secret in its final message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from changefeed.engine.auth import ScramSecret, salted_password, scram_secret
from changefeed.engine.database import DB_FILE, open_sqlite

__all__ = ["MECHANISMS", "AuthFailed", "PlainAuth", "ScramAuth", "lookup_secret"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256")


class AuthFailed(Exception):
    """Authentication failed; the message goes back to the client."""


def lookup_secret(db: Path, user: str) -> ScramSecret | None:
    path = db / DB_FILE
    if not path.exists():
        return None
    conn = open_sqlite(path, readonly=True)
    try:
        return scram_secret(conn, user)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _fail(user: str) -> AuthFailed:
    return AuthFailed(f"Authentication failed: invalid credentials for user {user!r}")


@dataclass
class PlainAuth:
    db: Path
    user: str | None = None

    def step(self, token: bytes) -> tuple[bytes, bool]:
        """Returns (server token, done). Raises AuthFailed."""
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthFailed("Authentication failed: malformed SASL/PLAIN token")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthFailed("Authentication failed: SASL/PLAIN token is not UTF-8") from None
        if authzid and authzid != user:
            raise AuthFailed("Authentication failed: authorization id differs from the user")
        secret = lookup_secret(self.db, user)
        if secret is None:
            raise _fail(user)
        salted = salted_password(password, secret.salt, secret.iterations)
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), secret.stored_key):
            raise _fail(user)
        self.user = user
        return b"", True


def _attrs(msg: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in msg.split(","):
        if len(part) >= 2 and part[1] == "=":
            out.setdefault(part[0], part[2:])
    return out


@dataclass
class ScramAuth:
    db: Path
    user: str | None = None
    _stage: int = 0
    _secret: ScramSecret | None = None
    _client_first_bare: str = ""
    _server_first: str = ""
    _nonce: str = ""
    _name: str = ""

    def step(self, token: bytes) -> tuple[bytes, bool]:
        try:
            msg = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthFailed("Authentication failed: SCRAM message is not UTF-8") from None
        if self._stage == 0:
            return self._first(msg), False
        if self._stage == 1:
            return self._final(msg), True
        raise AuthFailed("Authentication failed: unexpected SCRAM message")

    def _first(self, msg: str) -> bytes:
        gs2, sep, bare = msg.partition(",")
        if gs2 not in ("n", "y") or not sep:
            raise AuthFailed("Authentication failed: unsupported SCRAM channel binding")
        _authz, sep, bare = bare.partition(",")
        a = _attrs(bare)
        if "n" not in a or "r" not in a:
            raise AuthFailed("Authentication failed: malformed SCRAM client-first message")
        self._name = a["n"].replace("=2C", ",").replace("=3D", "=")
        secret = lookup_secret(self.db, self._name)
        if secret is None:
            # Answer like for a real user, and fail at the proof: user names are not disclosed.
            secret = ScramSecret(4096, os.urandom(16), os.urandom(32), os.urandom(32))
        self._secret = secret
        self._client_first_bare = bare
        self._nonce = a["r"] + base64.b64encode(os.urandom(18)).decode()
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(secret.salt).decode()},i={secret.iterations}"
        )
        self._stage = 1
        return self._server_first.encode()

    def _final(self, msg: str) -> bytes:
        assert self._secret is not None
        without_proof, _, _ = msg.rpartition(",p=")
        a = _attrs(msg)
        if a.get("r") != self._nonce or "p" not in a:
            raise _fail(self._name)
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(a["p"], validate=True)
        except ValueError:
            raise _fail(self._name) from None
        signature = hmac.digest(self._secret.stored_key, auth_message, "sha256")
        if len(proof) != len(signature):
            raise _fail(self._name)
        client_key = bytes(x ^ y for x, y in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self._secret.stored_key):
            raise _fail(self._name)
        self._stage = 2
        self.user = self._name
        server_sig = hmac.digest(self._secret.server_key, auth_message, "sha256")
        return b"v=" + base64.b64encode(server_sig)
