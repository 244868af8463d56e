"""Network endpoints of ``changefeed serve``: one package per protocol.

Each protocol package (``pg``, ``kafka``, ``registry``, ``cql``) exposes ``create(config) -> Endpoint``.
:data:`ENDPOINTS` maps the ``serve`` flag name to that factory's import path, imported lazily so
that a missing optional dependency of one protocol never breaks the others.

All endpoints of one ``serve`` run share one asyncio event loop (see ``changefeed.cli.serve_cmd``);
blocking engine or topic-log calls run in the loop's thread pool.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from changefeed.exceptions import InvalidOption

#: ``serve`` flag -> "module:factory". The factory takes an :class:`EndpointConfig`.
ENDPOINTS: dict[str, str] = {
    "pg": "changefeed.server.pg:create",
    "kafka": "changefeed.server.kafka:create",
    "registry": "changefeed.server.registry:create",
    "cql": "changefeed.server.cql:create",
}

#: Default ports, as the real systems use them (CockroachDB SQL, Kafka, Confluent Schema Registry,
#: the CQL native protocol).
DEFAULT_PORTS = {"pg": 26257, "kafka": 9092, "registry": 8081, "cql": 9042}

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """Where an endpoint serves and what it serves."""

    db: Path
    host: str = LOOPBACK
    port: int = 0  # 0: any free port (tests)
    certs_dir: Path | None = None  # CockroachDB layout: ca.crt, node.crt, node.key


class Endpoint(Protocol):
    """A running network endpoint on the shared event loop."""

    name: str

    async def start(self) -> tuple[str, int]:
        """Bind and start accepting; return the bound (host, port)."""
        ...

    async def stop(self) -> None:
        """Stop accepting, end every connection cleanly (rolling back open transactions)."""
        ...


def parse_address(text: str, default_port: int) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT``, ``PORT`` or ``HOST`` (IPv6 as ``[::1]:PORT``)."""
    host, port_text = LOOPBACK, ""
    t = text.strip()
    if t.startswith("["):
        end = t.find("]")
        if end < 0:
            raise InvalidOption(f"invalid address {text!r}: missing ']'")
        host, rest = t[1:end], t[end + 1 :]
        port_text = rest[1:] if rest.startswith(":") else rest
    elif t.count(":") == 1:
        h, port_text = t.split(":")
        host = h or LOOPBACK
    elif t.isdigit():
        port_text = t
    elif t:
        host = t
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise InvalidOption(f"invalid address {text!r}: port must be a number from 0 to 65535")
    return host, int(port_text)


def create_endpoint(kind: str, config: EndpointConfig) -> Endpoint:
    target = ENDPOINTS.get(kind)
    if target is None:
        raise InvalidOption(f"unknown endpoint {kind!r}; known: {', '.join(sorted(ENDPOINTS))}")
    module_name, factory = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("changefeed.server"):
            raise InvalidOption(f"the {kind} endpoint is not available in this build") from None
        raise
    endpoint: Endpoint = getattr(module, factory)(config)
    return endpoint
