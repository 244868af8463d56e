"""Passwords, kept as PostgreSQL keeps them: SCRAM-SHA-256 secrets, never the password itself.

A secret is ``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`` (base64 parts), the
text PostgreSQL stores in ``pg_authid.rolpassword``. It lets a server verify a SCRAM client
proof (RFC 5802 / RFC 7677) without ever knowing the password. Users live in the engine's
``_users`` table; the secret is its ``password`` option.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import sqlite3
from dataclasses import dataclass

import orjson

from changefeed.exceptions import InvalidOption

SCRAM_ITERATIONS = 4096
SCRAM_PREFIX = "SCRAM-SHA-256$"
#: The user that exists in every database and may do everything (``admin`` role), as in CockroachDB.
ROOT = "root"


@dataclass(frozen=True, slots=True)
class ScramSecret:
    iterations: int
    salt: bytes
    stored_key: bytes
    server_key: bytes

    def text(self) -> str:
        b64 = base64.b64encode
        return (
            f"{SCRAM_PREFIX}{self.iterations}:{b64(self.salt).decode()}"
            f"${b64(self.stored_key).decode()}:{b64(self.server_key).decode()}"
        )

    @staticmethod
    def parse(text: str) -> ScramSecret:
        try:
            if not text.startswith(SCRAM_PREFIX):
                raise ValueError
            head, keys = text[len(SCRAM_PREFIX) :].split("$")
            iterations, salt = head.split(":")
            stored, server = keys.split(":")
            b64 = base64.b64decode
            return ScramSecret(int(iterations), b64(salt), b64(stored), b64(server))
        except ValueError:
            raise InvalidOption("not a SCRAM-SHA-256 secret") from None


def salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)


def make_scram_secret(
    password: str, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS
) -> ScramSecret:
    salt = os.urandom(16) if salt is None else salt
    salted = salted_password(password, salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    return ScramSecret(
        iterations=iterations,
        salt=salt,
        stored_key=hashlib.sha256(client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", "sha256"),
    )


def password_option(value: str | None) -> str | None:
    """What ``WITH PASSWORD`` stores: a SCRAM secret (a given secret is kept as is), or NULL."""
    if value is None:
        return None
    if value.startswith(SCRAM_PREFIX):
        return ScramSecret.parse(value).text()
    return make_scram_secret(value).text()


def user_exists(conn: sqlite3.Connection, user: str) -> bool:
    if user == ROOT:
        return True
    return conn.execute("SELECT 1 FROM _users WHERE name = ?", (user,)).fetchone() is not None


def scram_secret(conn: sqlite3.Connection, user: str) -> ScramSecret | None:
    """The user's SCRAM secret, or None when the user does not exist or has no password."""
    row = conn.execute("SELECT options FROM _users WHERE name = ?", (user,)).fetchone()
    if row is None:
        return None
    secret = orjson.loads(row[0]).get("password")
    return ScramSecret.parse(secret) if isinstance(secret, str) else None
