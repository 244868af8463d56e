"""Network endpoints of ``changefeed serve``: one package per protocol.

Each protocol package (``pg``, ``kafka``, ``registry``, ``cql``, ``http``) exposes
``create(config) -> Endpoint``. :data:`ENDPOINTS` maps the flag name (``serve --pg``, ``start
--kafka``) to that factory's import path, imported lazily so that a missing optional dependency
of one protocol never breaks the others; :data:`DEFAULT_PORTS` holds the port a node
(``changefeed start``) serves each on unless a flag moves it or turns it off. A new endpoint is
one entry in each: ``start`` grows its flag and serves it from them.

All endpoints of one process share one asyncio event loop (see ``changefeed.server.node``);
blocking engine or topic-log calls run in the loop's thread pool.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from changefeed.exceptions import InvalidOption
from changefeed.observe import EndpointMetrics, Readiness, default_metrics

#: ``serve`` flag -> "module:factory". The factory takes an :class:`EndpointConfig`.
ENDPOINTS: dict[str, str] = {
    "pg": "changefeed.server.pg:create",
    "kafka": "changefeed.server.kafka:create",
    "registry": "changefeed.server.registry:create",
    "cql": "changefeed.server.cql:create",
    "http": "changefeed.server.http:create",
}

#: Default ports, as the real systems use them (CockroachDB SQL, Kafka, Confluent Schema Registry,
#: ScyllaDB CQL, CockroachDB's DB Console), in the order a node starts them.
DEFAULT_PORTS = {"pg": 26257, "kafka": 9092, "registry": 8081, "cql": 9042, "http": 8080}

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """Where an endpoint serves and what it serves."""

    db: Path
    host: str = LOOPBACK
    port: int = 0  # 0: any free port (tests)
    certs_dir: Path | None = None  # CockroachDB layout: ca.crt, node.crt, node.key
    #: where the endpoint counts connections, requests and errors (the process's figures)
    metrics: EndpointMetrics = field(default_factory=default_metrics, compare=False)
    #: the node's readiness (``/health?ready=1``); None outside a node
    readiness: Readiness | None = field(default=None, compare=False)


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


def endpoint_available(kind: str) -> bool:
    """Whether this build has the endpoint ``kind`` (its package is installed)."""
    target = ENDPOINTS.get(kind)
    if target is None:
        return False
    return importlib.util.find_spec(target.split(":")[0]) is not None


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
