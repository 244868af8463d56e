"""A small HTTP/1.1 server on asyncio streams, enough for REST clients and browsers (the schema
registry and the node's http endpoint).

Requests: request line, headers, a ``Content-Length`` body (chunked request bodies are refused
with 411). Responses always carry ``Content-Length``. Connections are kept alive (HTTP/1.1
default; HTTP/1.0 only with ``Connection: keep-alive``) until the client closes, sends
``Connection: close``, or the server stops.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import parse_qs, unquote, urlsplit

from changefeed.observe import NULL_ENDPOINT_METRICS, EndpointMetrics

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class Request:
    method: str
    path: list[str]  # the path's segments, percent-decoded
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""

    def param(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[-1] if values else default


@dataclass(slots=True)
class Response:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _encode(resp: Response, keep_alive: bool) -> bytes:
    try:
        reason = HTTPStatus(resp.status).phrase
    except ValueError:
        reason = ""
    lines = [
        f"HTTP/1.1 {resp.status} {reason}",
        f"Content-Type: {resp.content_type}",
        f"Content-Length: {len(resp.body)}",
    ]
    lines += [f"{k}: {v}" for k, v in resp.headers.items()]
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + resp.body


async def _read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> tuple[Request, bool] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise _BadRequest(400, "incomplete request") from None
        return None
    except asyncio.LimitOverrunError:
        raise _BadRequest(431, "request header too large") from None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _BadRequest(400, f"malformed request line {lines[0]!r}")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequest(400, f"malformed header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    conn = headers.get("connection", "").lower()
    keep_alive = conn != "close" if version == "HTTP/1.1" else conn == "keep-alive"
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise _BadRequest(411, "chunked request bodies are not supported; send Content-Length")
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit():
        raise _BadRequest(400, f"invalid Content-Length {length_text!r}")
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise _BadRequest(413, "request body too large")
    if length and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # curl waits for this before a large body
        await writer.drain()
    body = await reader.readexactly(length) if length else b""
    url = urlsplit(target)
    segments = [unquote(s) for s in url.path.split("/") if s]
    return Request(method.upper(), segments, parse_qs(url.query), headers, body), keep_alive


class HttpServer:
    """Serves ``handler`` on (host, port); :meth:`stop` closes the listener and every connection."""

    def __init__(
        self,
        handler: Handler,
        error: Callable[[int, str], Response],
        *,
        metrics: EndpointMetrics = NULL_ENDPOINT_METRICS,
        name: str = "http",
    ) -> None:
        self._handler = handler
        self._error = error
        self._metrics = metrics
        self._name = name
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEADER_BYTES)
        sock = self._server.sockets[0].getsockname()
        return str(sock[0]), int(sock[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._conns):
            w.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._conns.add(writer)
        self._metrics.connection_opened(self._name)
        try:
            while True:
                try:
                    got = await _read_request(reader, writer)
                except _BadRequest as exc:
                    self._metrics.error(self._name)
                    writer.write(_encode(self._error(exc.status, str(exc)), keep_alive=False))
                    await writer.drain()
                    return
                if got is None:
                    return
                request, keep_alive = got
                self._metrics.request(self._name)
                response = await self._handler(request)
                if response.status >= 400:
                    self._metrics.error(self._name)
                writer.write(_encode(response, keep_alive))
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._conns.discard(writer)
            self._metrics.connection_closed(self._name)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
