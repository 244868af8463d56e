"""The CQL endpoint: connections, frames, authentication, events; requests go to :mod:`.session`.

Each connection reads frames one after another and answers each before reading the next (drivers
may pipeline requests on many stream ids; the answers carry them back). A frame this endpoint
cannot parse, an unsupported protocol version or a body that breaks the protocol gets a protocol
error (code 0x000A) and the connection closes; other connections are unaffected. A client that
stops reading is closed once its unread answers pass ``WRITE_TIMEOUT``.

Authentication as ScyllaDB's two authenticators would do it together: while no user has a
password, a loopback client is let in without credentials as ``root`` (AllowAllAuthenticator,
every privilege); once any user has one, or for a client that is not on loopback, the endpoint
answers STARTUP with ``AUTHENTICATE org.apache.cassandra.auth.PasswordAuthenticator`` and checks
SASL PLAIN credentials against the stored SCRAM secrets (a user without a password is let in by
name from loopback only).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import logging
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from changefeed.connection import Connection
from changefeed.engine import auth
from changefeed.engine.privileges import check_login
from changefeed.exceptions import ChangefeedError
from changefeed.server import EndpointConfig
from changefeed.server.cql import wire as w
from changefeed.server.cql.session import ENDPOINT, CqlSession, Shared
from changefeed.server.cql.statements import SchemaChange
from changefeed.server.cql.system import Node, user_tables
from changefeed.sql.parser import parse
from changefeed.sql.statements.common import LOG_SUFFIX

log = logging.getLogger("changefeed.server.cql")

POOL_SIZE = 32
#: Seconds between looks at the catalog for schema changes made elsewhere (other endpoints,
#: ``changefeed sql``, other processes), which are then sent as SCHEMA_CHANGE events.
SCHEMA_POLL_S = 1.0
#: How long a DDL that created CDC logs waits for subscribed drivers to re-read their schema (it
#: answers as soon as they have: the Python driver's debounce is up to 2 s, and a loaded machine
#: adds the refresh's own queries; the Python driver itself waits up to 10 s for schema agreement).
LOG_REFRESH_WAIT_S = 6.0
#: Seconds a client has to finish STARTUP and authentication.
STARTUP_TIMEOUT = 30.0
#: Seconds to wait for a client that stopped reading before its connection is closed.
WRITE_TIMEOUT = 30.0
AUTHENTICATOR = "org.apache.cassandra.auth.PasswordAuthenticator"


def _is_loopback(peer: object) -> bool:
    if isinstance(peer, tuple) and peer:
        with contextlib.suppress(ValueError):
            return ipaddress.ip_address(str(peer[0]).split("%")[0]).is_loopback
    return False


def load_tls(certs_dir: Any) -> ssl.SSLContext | None:
    """TLS from CockroachDB's layout (``node.crt``, ``node.key``), as the other endpoints do it.
    CQL has no STARTTLS: with certificates the whole port speaks TLS."""
    if certs_dir is None:
        return None
    crt, key = certs_dir / "node.crt", certs_dir / "node.key"
    if not crt.exists() or not key.exists():
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(crt), str(key))
    return ctx


class CqlEndpoint:
    """``changefeed serve --cql``: the CQL native protocol (v4, v3) over one database directory."""

    name = "cql"

    def __init__(self, config: EndpointConfig) -> None:
        self.config = config
        self.tls = load_tls(config.certs_dir)
        self.pool = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="cql")
        self.server: asyncio.Server | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.sessions: set[CqlSession] = set()
        self.shared: Shared | None = None
        self.node = Node(config.host, config.port)
        self._auth_lock = threading.Lock()
        self._watcher: asyncio.Future[None] | None = None
        self._schema: dict[tuple[str, str], Any] = {}
        self._schema_lock = asyncio.Lock()

    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        # Open the database once up front: a broken directory fails here, not at each connection.
        self._auth = await loop.run_in_executor(self.pool, lambda: Connection(self.config.db, user=auth.ROOT))
        self.server = await asyncio.start_server(
            self._accept, self.config.host, self.config.port, ssl=self.tls
        )
        host, port = self.server.sockets[0].getsockname()[:2]
        self.node = Node(str(host), int(port))
        self.shared = Shared(
            self.config.db,
            self.pool,
            self.node,
            self.broadcast,
            self.config.metrics,
            publish=self.publish_schema,
        )
        self._schema = await loop.run_in_executor(self.pool, self._schema_snapshot)
        # load the cql grammar now (a few hundred ms), not in the first client's first statement
        await loop.run_in_executor(self.pool, parse, "SELECT key FROM system.local", "cql")
        self._watcher = asyncio.ensure_future(self._watch_schema())
        return str(host), int(port)

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
        if self.server is not None:
            self.server.close()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=5)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)
        loop = asyncio.get_running_loop()
        with contextlib.suppress(Exception):
            await loop.run_in_executor(self.pool, self._auth.close)
        self.pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ events
    def broadcast(self, change: SchemaChange) -> None:
        """Send a SCHEMA_CHANGE event to every connection that REGISTERed for it."""
        for s in list(self.sessions):
            s.push_schema_event(change)

    def _schema_snapshot(self) -> dict[tuple[str, str], Any]:
        """(keyspace, table) -> what ``system_schema`` shows of it; ``(keyspace, "")`` per keyspace."""
        with self._auth_lock:
            session = self._auth.session
            session.db.refresh_catalog()
            out: dict[tuple[str, str], Any] = {(ks, ""): True for ks in session.db.keyspaces}
            for d in user_tables(session):
                out[(d.keyspace, "")] = True
                out[(d.keyspace, d.name)] = (d.columns, d.cdc)
            return out

    async def _watch_schema(self) -> None:
        while True:
            await asyncio.sleep(SCHEMA_POLL_S)
            try:
                await self.publish_schema()
            except Exception:  # a broken catalog read must not end the watcher
                log.exception("cql: reading the catalog for schema events failed")

    async def publish_schema(self, origin: CqlSession | None = None) -> list[SchemaChange]:
        """Send an event for every change of the catalog since it was last looked at: after a DDL
        statement (``origin``'s), before its answer, as ScyllaDB's notifier does for each table
        a schema change creates, alters or drops (a CDC log with its base table), and every
        second for changes made elsewhere.

        When the DDL created CDC logs, its answer also waits (at most
        :data:`LOG_REFRESH_WAIT_S`) until every other connection subscribed to schema events has
        re-read those logs' schema: drivers debounce events (the Python driver by up to 2 s), and a
        client that reads a log right after creating its table (a cqlsh script: CREATE TABLE,
        then SELECT from the log) needs the log in its metadata to print the rows."""
        loop = asyncio.get_running_loop()
        async with self._schema_lock:
            now = await loop.run_in_executor(self.pool, self._schema_snapshot)
            before, self._schema = self._schema, now
            changes = schema_diff(before, now)
        logs = {
            (c.keyspace, c.name)
            for c in changes
            if c.change == "CREATED" and c.target == "TABLE" and c.name.endswith(LOG_SUFFIX)
        }
        watchers = [s for s in self.sessions if s is not origin and "SCHEMA_CHANGE" in s.events]
        for s in watchers:
            s.reread.clear()
        for change in changes:
            self.broadcast(change)
        if origin is not None and logs:
            deadline = loop.time() + LOG_REFRESH_WAIT_S
            for s in watchers:
                while s in self.sessions and not s.has_reread(logs):
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        return changes
                    s.reread_event.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(s.reread_event.wait(), remaining)
        return changes

    # ------------------------------------------------------------------ connections
    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        peer = writer.get_extra_info("peername")
        self.config.metrics.connection_opened(ENDPOINT)
        try:
            await self._serve(reader, writer, peer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, ssl.SSLError, w.CloseConnection):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:  # one broken connection never takes the server down
            log.exception("cql connection from %s failed", peer)
        finally:
            self.config.metrics.connection_closed(ENDPOINT)
            self.tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: object) -> None:
        version, user, compression = await asyncio.wait_for(
            self._startup(reader, writer, peer), STARTUP_TIMEOUT
        )
        assert self.shared is not None
        session = CqlSession(self.shared, reader, writer, version, user, compression)
        try:
            await session.open()
        except ChangefeedError as exc:
            writer.write(w.frame(version, 0, w.ERROR, w.error_body(w.BAD_CREDENTIALS, str(exc))))
            return
        self.sessions.add(session)
        try:
            await session.run()
        finally:
            self.sessions.discard(session)
            await session.close()

    async def read_frame(self, reader: asyncio.StreamReader) -> tuple[int, int, int, int, bytes]:
        """(version, flags, stream, opcode, body) of the next request frame."""
        head = await reader.readexactly(w.HEADER_SIZE)
        version, flags, stream, opcode, length = w.HEADER.unpack(head)
        if version & 0x80:
            raise w.ProtocolError("a response frame was sent to the server")
        if length < 0 or length > w.MAX_BODY:
            raise w.ProtocolError(f"frame body of {length} bytes is out of bounds")
        body = await reader.readexactly(length)
        return version, flags, stream, opcode, body

    async def _startup(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: object
    ) -> tuple[int, str, str | None]:
        """OPTIONS/STARTUP/authentication; returns the protocol version, the user and the
        compression the client asked for (frames after STARTUP's answer use it)."""
        loop = asyncio.get_running_loop()
        version = w.MAX_VERSION
        user: str | None = None
        authenticating = False
        compression: str | None = None
        while True:
            try:
                v, flags, stream, opcode, body = await self.read_frame(reader)
            except w.ProtocolError as exc:
                writer.write(w.frame(version, 0, w.ERROR, w.error_body(w.PROTOCOL_ERROR, str(exc))))
                raise w.CloseConnection from None
            if v not in w.VERSIONS:
                # ScyllaDB's answer, in a frame of the highest version it serves: drivers downgrade.
                msg = f"Invalid or unsupported protocol version ({v}); supported versions are (3/v3, 4/v4)"
                writer.write(w.frame(w.MAX_VERSION, stream, w.ERROR, w.error_body(w.PROTOCOL_ERROR, msg)))
                await writer.drain()
                continue
            version = v
            try:
                if flags & w.FLAG_COMPRESSION:
                    if compression != "lz4":
                        raise w.ProtocolError("compression was not negotiated")
                    body = w.lz4_decompress(body)
                r = w.Reader(body)
                if opcode == w.OPTIONS:
                    out = w.Writer().string_multimap(w.OPTIONS_ANSWER).getvalue()
                    writer.write(w.frame(version, stream, w.SUPPORTED, out))
                elif opcode == w.STARTUP:
                    options = r.string_map()
                    r.done()
                    compression = options.get("COMPRESSION") or None
                    if compression is not None and compression not in w.OPTIONS_ANSWER["COMPRESSION"]:
                        raise w.ProtocolError(f"Unknown compression algorithm: {compression}")
                    anonymous = await loop.run_in_executor(self.pool, self._anonymous_allowed, peer)
                    if anonymous:
                        writer.write(w.frame(version, stream, w.READY, b""))
                        await writer.drain()
                        return version, auth.ROOT, compression
                    authenticating = True
                    writer.write(
                        w.frame(version, stream, w.AUTHENTICATE, w.Writer().string(AUTHENTICATOR).getvalue())
                    )
                elif opcode == w.AUTH_RESPONSE and authenticating:
                    token = r.bytes_() or b""
                    r.done()
                    user = await loop.run_in_executor(self.pool, self._check_plain, token, peer)
                    if user is None:
                        name = _plain_user(token)
                        msg = f"Provided username {name} and/or password are incorrect"
                        writer.write(w.frame(version, stream, w.ERROR, w.error_body(w.BAD_CREDENTIALS, msg)))
                        await writer.drain()
                        raise w.CloseConnection
                    writer.write(w.frame(version, stream, w.AUTH_SUCCESS, w.Writer().bytes_(None).getvalue()))
                    await writer.drain()
                    return version, user, compression
                else:
                    what = "before authentication" if authenticating else "before STARTUP"
                    raise w.ProtocolError(f"Unexpected message {opcode} {what}")
            except w.ProtocolError as exc:
                writer.write(w.frame(version, stream, w.ERROR, w.error_body(w.PROTOCOL_ERROR, str(exc))))
                await writer.drain()
                raise w.CloseConnection from None
            await writer.drain()

    # ------------------------------------------------------------------ authentication (pool threads)
    def _anonymous_allowed(self, peer: object) -> bool:
        if not _is_loopback(peer):
            return False
        with self._auth_lock:
            c = self._auth.db.conn
            row = c.execute(
                "SELECT 1 FROM _users WHERE json_extract(options, '$.password') IS NOT NULL LIMIT 1"
            ).fetchone()
        return row is None

    def _check_plain(self, token: bytes, peer: object) -> str | None:
        with self._auth_lock:
            return self._check_plain_locked(token, peer)

    def _check_plain_locked(self, token: bytes, peer: object) -> str | None:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            return None
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            return None
        if authzid and authzid != user:
            return None
        c = self._auth.db.conn
        if not auth.user_exists(c, user):
            return None
        try:
            check_login(c, user)
        except ChangefeedError:
            return None
        secret = auth.scram_secret(c, user)
        if secret is None:
            return user if _is_loopback(peer) else None
        salted = auth.salted_password(password, secret.salt, secret.iterations)
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), secret.stored_key):
            return None
        return user


def schema_diff(before: dict[tuple[str, str], Any], after: dict[tuple[str, str], Any]) -> list[SchemaChange]:
    """The SCHEMA_CHANGE events between two catalog snapshots: keyspaces created first, dropped last."""
    out: list[SchemaChange] = []
    for (ks, name), what in sorted(after.items(), key=lambda kv: kv[0][1] != ""):
        old = before.get((ks, name))
        if old is None:
            out.append(SchemaChange("CREATED", "TABLE" if name else "KEYSPACE", ks, name))
        elif name and old != what:
            out.append(SchemaChange("UPDATED", "TABLE", ks, name))
    for ks, name in sorted(before, key=lambda k: k[1] == ""):
        if (ks, name) not in after:
            out.append(SchemaChange("DROPPED", "TABLE" if name else "KEYSPACE", ks, name))
    return out


def _plain_user(token: bytes) -> str:
    parts = token.split(b"\x00")
    return parts[1].decode("utf-8", "replace") if len(parts) == 3 else ""
