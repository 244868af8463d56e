"""One client connection's state, shared by the connection loop and the API handlers."""

from __future__ import annotations

from dataclasses import dataclass, field

from changefeed.server.kafka.sasl import PlainAuth, ScramAuth

__all__ = ["Session"]


@dataclass
class Session:
    """One client connection's state."""

    client_id: str
    client_host: str
    host: str  # the address this endpoint advertises to this client
    port: int
    user: str | None = None
    mechanism: PlainAuth | ScramAuth | None = None
    raw_sasl: bool = False  # SaslHandshake v0: raw tokens follow
    extra: dict[str, object] = field(default_factory=dict)
