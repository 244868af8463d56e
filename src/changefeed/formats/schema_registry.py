"""Schema ids for the Avro encoder: the :class:`SchemaResolver` seam and its Confluent client.

The encoder never talks to the network itself: it asks a resolver for the id of each (subject,
schema) pair, once per schema (ids are then carried to Spark executors with the schema). The
production resolver, :class:`RegistryClient`, registers schemas with a Confluent-compatible schema
registry over HTTP (``POST /subjects/<subject>/versions``), the way CockroachDB does, and caches
the answers so a feed registers each schema once. :class:`MemoryResolver` hands out ids from 1 in
memory, for tests and tools that need no server.

Errors are CockroachDB's: ``contacting confluent schema registry: ...`` when the registry cannot be
reached (or answers 5xx), ``registering schema to <url> <status>: <body>`` when it refuses a
schema, ``unsupported scheme: "ftp"`` for a URL that is not http(s).
"""

from __future__ import annotations

import threading
from typing import Protocol
from urllib.parse import quote, urlsplit

import httpx
import orjson

from changefeed.exceptions import InvalidOption, SchemaRegistryError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
#: CockroachDB retries a registration twice before failing the changefeed.
RETRIES = 2


class SchemaResolver(Protocol):
    def register(self, subject: str, schema: str) -> int:
        """The registry id of ``schema`` (Avro schema JSON) under ``subject``, registering it if new."""
        ...


class MemoryResolver:
    """Ids from 1, one per distinct schema text, like a fresh registry (no compatibility checks)."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self.subjects: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def register(self, subject: str, schema: str) -> int:
        with self._lock:
            sid = self._ids.setdefault(schema, len(self._ids) + 1)
            versions = self.subjects.setdefault(subject, [])
            if sid not in versions:
                versions.append(sid)
            return sid


def parse_registry_url(url: str) -> str:
    """Validate ``confluent_schema_registry`` and return its base URL (no trailing slash)."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        raise InvalidOption(f'invalid confluent_schema_registry URL "{url}": invalid port') from None
    if parts.scheme not in ("http", "https"):
        raise InvalidOption(f'unsupported scheme: "{parts.scheme}"')
    if not parts.hostname:
        raise InvalidOption(f'invalid confluent_schema_registry URL "{url}": no host')
    if parts.query:
        raise InvalidOption(
            f"unknown confluent_schema_registry query parameters: {parts.query} (TLS parameters are not supported)"
        )
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


class RegistryClient:
    """Registers schemas with a Confluent schema registry; caches (subject, schema) -> id."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = parse_registry_url(url)
        self._http = httpx.Client(base_url=self.url, timeout=timeout, headers={"Accept": CONTENT_TYPE})
        self._cache: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, body: bytes | None = None) -> httpx.Response:
        last: Exception | None = None
        for _ in range(RETRIES + 1):
            try:
                resp = self._http.request(
                    method, path, content=body, headers={"Content-Type": CONTENT_TYPE} if body else None
                )
            except httpx.HTTPError as exc:
                last = exc
                continue
            if resp.status_code >= 500:
                last = SchemaRegistryError(f"{resp.status_code}: {resp.text}")
                continue
            return resp
        raise SchemaRegistryError(f"contacting confluent schema registry: {last}")

    def ping(self) -> None:
        """CockroachDB's liveness check: ``GET /mode`` (only a failure to answer or a 5xx fails)."""
        self._send("GET", "/mode")

    def register(self, subject: str, schema: str) -> int:
        key = (subject, schema)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        body = orjson.dumps({"schema": schema}) + b"\n"
        resp = self._send("POST", f"/subjects/{quote(subject, safe='')}/versions", body)
        if resp.status_code != 200:
            raise SchemaRegistryError(
                f"registering schema to {self.url} {resp.status_code} {resp.reason_phrase}: {resp.text}"
            )
        try:
            sid = int(orjson.loads(resp.content)["id"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise SchemaRegistryError(
                f"registering schema to {self.url}: unexpected answer {resp.text!r}"
            ) from None
        with self._lock:
            self._cache[key] = sid
        return sid

    def schema(self, schema_id: int) -> str:
        """The schema text of an id (``GET /schemas/ids/<id>``)."""
        resp = self._send("GET", f"/schemas/ids/{schema_id}")
        if resp.status_code != 200:
            raise SchemaRegistryError(
                f"fetching schema {schema_id} from {self.url} {resp.status_code}: {resp.text}"
            )
        return str(orjson.loads(resp.content)["schema"])


_CLIENTS: dict[str, RegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(url: str) -> RegistryClient:
    """One shared, caching client per registry URL in this process."""
    base = parse_registry_url(url)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(base)
        if client is None:
            client = _CLIENTS[base] = RegistryClient(base)
        return client


__all__ = [
    "CONTENT_TYPE",
    "MemoryResolver",
    "RegistryClient",
    "SchemaResolver",
    "client_for",
    "parse_registry_url",
]
