"""The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL runs it.

The server checks the client's proof against the stored secret of :mod:`changefeed.engine.auth`
and never sees the password. An unknown user, or one without a password, gets a made-up secret so
that the exchange looks the same and fails only at the proof, as in PostgreSQL.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass

from changefeed.engine.auth import SCRAM_ITERATIONS, ScramSecret, make_scram_secret

MECHANISM = "SCRAM-SHA-256"


class ScramError(Exception):
    """The exchange broke off; the message says why (malformed message, bad nonce, bad proof)."""


def _attrs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed SCRAM message: {part!r}")
        out[part[0]] = part[2:]
    return out


@dataclass
class ScramExchange:
    secret: ScramSecret
    known: bool  # False: a made-up secret (unknown user, or no password): the proof always fails
    client_first_bare: str = ""
    server_first: str = ""
    nonce: str = ""
    gs2_header: str = ""

    @staticmethod
    def for_secret(secret: ScramSecret | None, user: str) -> ScramExchange:
        if secret is not None:
            return ScramExchange(secret, True)
        # a stable fake salt per user name, so that probing gives nothing away
        salt = hashlib.sha256(b"changefeed-mock-salt:" + user.encode()).digest()[:16]
        return ScramExchange(
            make_scram_secret(os.urandom(16).hex(), salt=salt, iterations=SCRAM_ITERATIONS), False
        )

    def first(self, client_first: str) -> str:
        """Take the client-first message; return the server-first message."""
        if client_first.startswith("p="):
            raise ScramError("channel binding is not supported by this server")
        if not client_first.startswith(("n,", "y,")):
            raise ScramError("malformed SCRAM message: bad GS2 header")
        parts = client_first.split(",", 2)
        if len(parts) != 3:
            raise ScramError("malformed SCRAM message")
        self.gs2_header = parts[0] + "," + parts[1] + ","
        self.client_first_bare = parts[2]
        attrs = _attrs(self.client_first_bare)
        if "r" not in attrs or not attrs["r"]:
            raise ScramError("malformed SCRAM message: no client nonce")
        self.nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        salt = base64.b64encode(self.secret.salt).decode()
        self.server_first = f"r={self.nonce},s={salt},i={self.secret.iterations}"
        return self.server_first

    def final(self, client_final: str) -> str | None:
        """Check the client-final message; return server-final, or None when the proof is wrong."""
        without_proof, sep, proof_part = client_final.rpartition(",p=")
        if not sep:
            raise ScramError("malformed SCRAM message: no proof")
        attrs = _attrs(without_proof)
        if attrs.get("r") != self.nonce:
            raise ScramError("SCRAM nonce mismatch")
        if base64.b64decode(attrs.get("c", "")) != self.gs2_header.encode():
            raise ScramError("SCRAM channel binding check failed")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("malformed SCRAM proof") from None
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.digest(self.secret.stored_key, auth_message, "sha256")
        if len(proof) != len(signature):
            return None
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not self.known or not hmac.compare_digest(
            hashlib.sha256(client_key).digest(), self.secret.stored_key
        ):
            return None
        server_sig = hmac.digest(self.secret.server_key, auth_message, "sha256")
        return "v=" + base64.b64encode(server_sig).decode()
