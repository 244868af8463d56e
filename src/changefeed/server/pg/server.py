"""The PostgreSQL endpoint: accepts connections, runs the startup phase (SSL, protocol version,
authentication), and hands each connection to a :class:`~changefeed.server.pg.session.PgSession`.

Processes: see :mod:`changefeed.server.pg.cluster` (by default one worker process per core serves
the connections; the listening process hands them over). Threads: in each process the protocol
runs on its asyncio loop; every engine call runs in one bounded
thread pool (``POOL_SIZE`` threads), so idle connections cost a socket and a SQLite handle, not a
thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import ssl
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from changefeed.engine.auth import ROOT
from changefeed.observe import NULL_ENDPOINT_METRICS, EndpointMetrics
from changefeed.server import EndpointConfig
from changefeed.server.pg import cluster, protocol as p
from changefeed.server.pg.scram import MECHANISM, ScramError, ScramExchange
from changefeed.server.pg.session import Backend, PgSession
from changefeed.server.pg.sessions import Registry
from changefeed.server.pg.write_group import WriteGroup

log = logging.getLogger(__name__)

#: Threads that run engine calls for all connections together (created on demand). Writers wait
#: for the engine's write lock on these threads, so the pool is larger than the core count.
POOL_SIZE = 32
#: Seconds a client has for the startup phase (startup packet and authentication).
STARTUP_TIMEOUT = 30.0


class AuthFailed(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _is_loopback(peer: object) -> bool:
    if isinstance(peer, tuple) and peer:
        with contextlib.suppress(ValueError):
            return ipaddress.ip_address(str(peer[0]).split("%")[0]).is_loopback
    return False


def load_tls(certs_dir: Path | None) -> ssl.SSLContext | None:
    """A server TLS context from CockroachDB's layout (``node.crt``, ``node.key``), or None."""
    if certs_dir is None:
        return None
    crt, key = certs_dir / "node.crt", certs_dir / "node.key"
    if not crt.exists() or not key.exists():
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(crt), str(key))
    return ctx


class PgEndpoint:
    """``changefeed serve --pg``: the PostgreSQL wire protocol over one database directory.

    With :data:`~changefeed.server.pg.cluster.WORKERS_ENV` above 1 (by default, one worker per
    core) this process only listens and hands connections to worker processes
    (:mod:`changefeed.server.pg.cluster`); otherwise it serves them itself."""

    name = "pg"

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.workers = cluster.worker_count()
        self.trust_root_on_loopback = True
        self.server: PgServer | None = None
        self.listener: asyncio.Server | None = None
        self.dispatcher: cluster.Dispatcher | None = None

    async def start(self) -> tuple[str, int]:
        if self.workers > 1:
            self.dispatcher = cluster.Dispatcher(
                self.config.db,
                self.config.certs_dir,
                self.workers,
                trust_root_on_loopback=self.trust_root_on_loopback,
                metrics=self.config.metrics,
            )
            return await self.dispatcher.start(self.config.host, self.config.port)
        self.server = PgServer(self.config.db, self.config.certs_dir, metrics=self.config.metrics)
        self.server.trust_root_on_loopback = self.trust_root_on_loopback
        self.listener = await asyncio.start_server(
            self.server.handle, self.config.host, self.config.port, limit=p.MAX_MESSAGE + 16
        )
        host, port = self.listener.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def stop(self) -> None:
        if self.dispatcher is not None:
            await self.dispatcher.stop()
        if self.listener is not None:
            self.listener.close()
        if self.server is not None:
            await self.server.stop()
        if self.listener is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.listener.wait_closed(), 2)


class PgServer:
    """Serves accepted connections on this process's event loop: startup, authentication and a
    :class:`PgSession` each. Used by :class:`PgEndpoint` in one process and by each worker."""

    def __init__(
        self,
        db: Path,
        certs_dir: Path | None,
        registry: Registry | None = None,
        metrics: EndpointMetrics = NULL_ENDPOINT_METRICS,
    ) -> None:
        self.db = db
        #: Where connections, statements and errors are counted (a worker's are tallied and
        #: handed to the listening process, see ``cluster.Tally``).
        self.metrics = metrics
        self.tls = load_tls(certs_dir)
        self.pool = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="pg")
        self.writes = WriteGroup(db, self.pool)
        self.registry = registry or Registry()
        self.tasks: set[asyncio.Task[None]] = set()
        self.trust_root_on_loopback = True
        #: Called when a connection ends (a worker tells its dispatcher, for load balancing).
        self.on_closed: Callable[[], None] | None = None

    async def stop(self) -> None:
        for session in list(self.registry.sessions.values()):
            session.terminate()
        if self.tasks:
            _, pending = await asyncio.wait(set(self.tasks), timeout=5)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2)
        await self.writes.close()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.registry.close()

    async def adopt(self, sock: socket.socket) -> None:
        """Serve a connection accepted elsewhere (handed over by the dispatcher)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=p.MAX_MESSAGE + 16, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, self.handle, loop=loop)
        try:
            await loop.connect_accepted_socket(lambda: protocol, sock)
        except OSError:
            sock.close()
            if self.on_closed is not None:
                self.on_closed()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        self.metrics.connection_opened("pg")
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError):
            pass
        except Exception:  # one broken connection must never take the server down
            self.metrics.error("pg")
            log.exception("pg connection failed")
        finally:
            self.metrics.connection_closed("pg")
            self.tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)
            if self.on_closed is not None:
                self.on_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            startup = await asyncio.wait_for(self._startup(reader, writer), STARTUP_TIMEOUT)
        except p.ProtocolViolation as exc:
            writer.write(p.error_response(exc.code, str(exc), severity="FATAL"))
            return
        if startup is None:
            return
        params, writer = startup
        user = params.get("user", "")
        try:
            await asyncio.wait_for(self._authenticate(reader, writer, user, peer), STARTUP_TIMEOUT)
        except AuthFailed as exc:
            writer.write(p.error_response(exc.code, str(exc), severity="FATAL"))
            return
        session = PgSession(
            Backend(self.db, self.pool, self.registry, self.metrics, self.writes),
            reader,
            writer,
            user,
            params,
            peer,
        )
        try:
            await session.open()
        except Exception as exc:
            code = getattr(exc, "code", "XX000")
            writer.write(p.error_response(str(code), str(exc), severity="FATAL"))
            return
        try:
            await session.run()
        finally:
            await session.close()

    async def _startup(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[dict[str, str], asyncio.StreamWriter] | None:
        tls_done = False
        while True:
            code, body = await p.read_startup(reader)
            if code == p.SSL_REQUEST and not tls_done:
                if self.tls is None:
                    writer.write(b"N")
                    await writer.drain()
                    continue
                writer.write(b"S")
                await writer.drain()
                await writer.start_tls(self.tls)
                tls_done = True
                continue
            if code == p.GSSENC_REQUEST:
                writer.write(b"N")
                await writer.drain()
                continue
            if code == p.CANCEL_REQUEST:
                pid, key = body.int32(), body.uint32()
                self.registry.cancel_by_key(pid, key)
                return None
            major, minor = code >> 16, code & 0xFFFF
            if major != 3:
                writer.write(
                    p.error_response(
                        "0A000",
                        f"unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0",
                        severity="FATAL",
                    )
                )
                return None
            params: dict[str, str] = {}
            unknown: list[str] = []
            while True:
                name = body.cstr()
                if not name:
                    break
                value = body.cstr()
                if name.startswith("_pq_."):
                    unknown.append(name)
                else:
                    params[name] = value
            if minor > 0 or unknown:
                writer.write(p.negotiate_protocol_version(0, unknown))
            if "user" not in params or not params["user"]:
                raise p.ProtocolViolation("no PostgreSQL user name specified in startup packet")
            return params, writer

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, user: str, peer: object
    ) -> None:
        loop = asyncio.get_running_loop()
        if user == ROOT and self.trust_root_on_loopback and _is_loopback(peer):
            return
        secret = await loop.run_in_executor(self.pool, self.registry.secret_of, self.db, user)
        exchange = ScramExchange.for_secret(secret, user)
        failed = AuthFailed("28P01", f'password authentication failed for user "{user}"')
        writer.write(p.auth_sasl([MECHANISM]))
        await writer.drain()
        kind, msg = await p.read_message(reader)
        if kind != b"p":
            raise AuthFailed("08P01", f"expected SASL response, got message type {kind!r}")
        try:
            mechanism = msg.cstr()
            if mechanism != MECHANISM:
                raise AuthFailed(
                    "28000", f"client selected an invalid SASL authentication mechanism {mechanism!r}"
                )
            length = msg.int32()
            first = msg.bytes_(length).decode() if length >= 0 else ""
            writer.write(p.auth_sasl_continue(exchange.first(first).encode()))
            await writer.drain()
            kind, msg = await p.read_message(reader)
            if kind != b"p":
                raise AuthFailed("08P01", f"expected SASL response, got message type {kind!r}")
            final = exchange.final(msg.rest().decode())
        except (ScramError, UnicodeDecodeError) as exc:
            raise AuthFailed("08P01", str(exc)) from None
        if final is None:
            raise failed
        writer.write(p.auth_sasl_final(final.encode()))
