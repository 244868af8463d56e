"""One CQL connection after STARTUP: QUERY, PREPARE, EXECUTE, BATCH, REGISTER, and the results.

Statements run on the connection's own engine session (``changefeed.connect(db, dialect="cql")``
semantics, privileges included) in the endpoint's thread pool. Results are paged as the driver
asks (``result_page_size``): the first page runs the statement and keeps the rest of the result
for ``paging_state`` to continue from; a paging state whose result is gone (expired, or another
endpoint) runs the statement again and resumes at its row offset. Consistency levels have no
effect (this is one node), but those ScyllaDB refuses for a statement are refused (``checks``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import socket
import sqlite3
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from changefeed.connection import Connection
from changefeed.exceptions import (
    ChangefeedError,
    DatabaseError,
    DuplicateObject,
    InvalidStatement,
    LockNotAvailable,
    PermissionDenied,
    SyntaxError_,
    TypeMismatch,
)
from changefeed.observe import NULL_ENDPOINT_METRICS, EndpointMetrics
from changefeed.server import gate_wait
from changefeed.server.cql import checks, system, wire as w
from changefeed.server.cql.columnar import encode_rows
from changefeed.server.cql.filtering import check_filtering
from changefeed.server.cql.results import (
    ColumnarRows,
    Paged,
    TupleRows,
    page_body,
    rows_body,
    schema_change_body,
)
from changefeed.server.cql.statements import (
    SchemaChange,
    Spec,
    bind_specs,
    check_batchable,
    result_types,
    schema_change,
    split_name,
    statement_table,
)
from changefeed.server.cql.types import decoder
from changefeed.server.cql.unset import without_unset
from changefeed.server.pg.inline import runs_inline
from changefeed.server.pool_calls import PoolCalls
from changefeed.sql import ast
from changefeed.sql.parser import parse
from changefeed.sql.result import Result
from changefeed.sql.statements.common import LOG_SUFFIX
from changefeed.sql.statements.select import select_log_columns

T = TypeVar("T")
_log = logging.getLogger(__name__)

WRITE_TIMEOUT = 30.0
#: Results kept for paging, per endpoint, and for how long.
PAGED_RESULTS = 64
PAGED_TTL_S = 300.0
#: Prepared statements kept per endpoint (drivers re-prepare on UNPREPARED).
PREPARED_MAX = 10_000
#: Bytes of rows encoded before the connection waits for the client to take them.
FLUSH_BYTES = 256 * 1024


@dataclass
class Prepared:
    id: bytes
    query: str
    keyspace: str | None
    stmt: ast.Statement
    specs: list[Spec]
    pk_at: list[int]
    decoders: list[Callable[[bytes], Any]] = field(default_factory=list)
    #: Short enough to run on the event loop (see ``server.pg.inline``): a thread hand-over costs
    #: more CPU than a single-row write.
    inline: bool = False


#: This endpoint's name in the node's metrics (``changefeed_endpoint_*{endpoint="cql"}``).
ENDPOINT = "cql"


class Shared:
    """What all connections of one endpoint share: the database, the pool, prepared statements,
    kept results, the node's address, and the schema-event broadcaster."""

    def __init__(
        self,
        db: Path,
        pool: Executor,
        node: system.Node,
        broadcast: Callable[[SchemaChange], None],
        metrics: EndpointMetrics = NULL_ENDPOINT_METRICS,
        publish: Callable[[CqlSession], Awaitable[list[SchemaChange]]] | None = None,
    ) -> None:
        self.db = db
        #: Sends the events of a DDL statement's schema changes (see ``CqlEndpoint.publish_schema``).
        self.publish = publish
        self.metrics = metrics
        self.pool = pool
        self.node = node
        self.broadcast = broadcast
        self.prepared: OrderedDict[bytes, Prepared] = OrderedDict()
        self.paged: OrderedDict[bytes, Paged] = OrderedDict()
        self.lock = threading.Lock()
        #: The commit time the CDC logs are closed up to (see CqlSession._close_log).
        self.closed_wall = 0


class QueryError(Exception):
    """An error answered with a CQL error code (and extra body bytes)."""

    def __init__(self, code: int, message: str, extra: bytes = b"") -> None:
        super().__init__(message)
        self.code = code
        self.extra = extra


def error_of(exc: BaseException) -> tuple[int, str, bytes]:
    """The CQL error code, message and extra body of an exception."""
    if isinstance(exc, QueryError):
        return exc.code, str(exc), exc.extra
    if isinstance(exc, SyntaxError_):
        return w.SYNTAX_ERROR, str(exc), b""
    if isinstance(exc, PermissionDenied):
        return w.UNAUTHORIZED, str(exc), b""
    if isinstance(exc, LockNotAvailable):
        return w.OVERLOADED, str(exc), b""
    if isinstance(exc, DatabaseError):
        return w.SERVER_ERROR, str(exc), b""
    if isinstance(exc, ChangefeedError):
        return w.INVALID, checks.cql_words(str(exc)), b""
    if isinstance(exc, sqlite3.Error):
        text = str(exc)
        if "locked" in text or "busy" in text:
            return (
                w.WRITE_TIMEOUT,
                f"Operation timed out: {text}",
                struct.pack(">hiii", 1, 0, 1, 0) + w.Writer().string("SIMPLE").getvalue(),
            )
        return w.SERVER_ERROR, text, b""
    return w.SERVER_ERROR, f"internal error: {type(exc).__name__}: {exc}", b""


class CqlSession:
    def __init__(
        self,
        shared: Shared,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        version: int,
        user: str,
        compression: str | None = None,
    ) -> None:
        self.shared = shared
        self.reader = reader
        self.writer = writer
        self.version = version
        self.user = user
        self.conn: Connection | None = None
        self.events: set[str] = set()
        #: Tables ((keyspace, name); ("", "*") for all) whose schema this connection re-read
        #: (``system_schema.views``, the last table a driver's metadata refresh reads), and an
        #: event set at each such read: see ``CqlEndpoint.publish_schema``.
        self.reread: set[tuple[str, str]] = set()
        self.reread_event = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.calls = PoolCalls(self.loop, self.shared.pool)
        self.lz4 = compression == "lz4"
        #: Answers waiting for the commits they acknowledge or may show to be durable, in order:
        #: (durability ticket, stream, frame); see :meth:`send`.
        self.held: list[tuple[int, int, bytes]] = []
        self.releasing: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        self.conn = await self.call(Connection, self.shared.db, user=self.user, dialect="cql")
        system.NODES[self.conn.session] = self.shared.node
        # Group commit on the event loop (docs/durability.md): commits leave their durability
        # ticket on the database, and send() holds every answer until what it acknowledges or
        # may show is durable, so short writes run on the loop without blocking it for a sync.
        self.conn.db.defer_durable = True

    async def close(self) -> None:
        await self.settle()
        task = self.releasing
        if task is not None:  # answers of commits already made: out once durable
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(task), WRITE_TIMEOUT)
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await self.call(conn.close)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the worker pool (:class:`PoolCalls`: :meth:`close` waits for it)."""
        return await self.calls.run(fn, *args, **kwargs)

    async def settle(self) -> None:
        """Wait until no call of this session is running on the worker pool."""
        await self.calls.settle()

    def send(self, stream: int, opcode: int, body: bytes) -> None:
        """Write an answer; held (with the ones after it) while a commit it acknowledges, or one
        of this server it may show, is not durable yet. The session goes on reading and running
        the client's next requests meanwhile, so a client with many requests in flight (a
        driver's pool) gets one sync for many commits, and one sync process serves every
        waiting session of the loop (``WalSync.wait_async``)."""
        if self.lz4 and body:
            frame = w.frame(self.version, stream, opcode, w.lz4_compress(body), w.FLAG_COMPRESSION)
        else:
            frame = w.frame(self.version, stream, opcode, body)
        ticket = self._durability_ticket()
        if not ticket and not self.held:
            self.writer.write(frame)
            return
        self.held.append((ticket, stream, frame))
        if self.releasing is None:
            self.releasing = self.loop.create_task(self._release_held())

    def _durability_ticket(self) -> int:
        conn = self.conn
        if conn is None or conn.db.syncer is None:
            return 0
        db = conn.db
        assert db.syncer is not None
        ticket, db.pending_durable = db.pending_durable, 0
        return ticket or db.syncer.pending()

    async def _release_held(self) -> None:
        """Write the held answers once their commits are durable. If a sync fails, the client
        never sees them acknowledged: each held request gets a server error and the connection
        is closed (as the PostgreSQL endpoint does)."""
        try:
            while self.held:
                n = len(self.held)
                ticket = max(t for t, _, _ in self.held[:n])
                conn = self.conn
                if ticket and conn is not None and conn.db.syncer is not None:
                    try:
                        await conn.db.syncer.wait_async(ticket)
                    except ChangefeedError as exc:
                        failed, self.held = self.held, []
                        for _, stream, _ in failed:
                            if stream >= 0:
                                self.writer.write(
                                    w.frame(
                                        self.version, stream, w.ERROR, w.error_body(w.SERVER_ERROR, str(exc))
                                    )
                                )
                        self.writer.close()
                        return
                ready, self.held = self.held[:n], self.held[n:]
                self.writer.write(b"".join(f for _, _, f in ready))
        finally:
            self.releasing = None

    async def drain(self) -> None:
        """Wait (bounded) for a client that reads slower than we write; one that stopped reading
        is cut off: its unwritten answers are dropped and the socket is closed at once (a
        graceful close would wait for them forever)."""
        transport = self.writer.transport
        if transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:
            try:
                await asyncio.wait_for(self.writer.drain(), WRITE_TIMEOUT)
            except TimeoutError:
                sock = transport.get_extra_info("socket")
                if sock is not None:  # drop what the kernel still holds for it too (a reset)
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                transport.abort()
                raise w.CloseConnection from None

    def push_schema_event(self, change: SchemaChange) -> None:
        if "SCHEMA_CHANGE" not in self.events:
            return
        body = w.Writer().string("SCHEMA_CHANGE").raw(schema_change_body(change)).getvalue()
        with contextlib.suppress(Exception):
            self.send(-1, w.EVENT, body)

    # ------------------------------------------------------------------ main loop
    async def run(self) -> None:
        while True:
            try:
                head = await self.reader.readexactly(w.HEADER_SIZE)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            version, flags, stream, opcode, length = w.HEADER.unpack(head)
            if version & 0x80 or (version & 0x7F) != self.version or length < 0 or length > w.MAX_BODY:
                why = (
                    f"Invalid message version. Got {version & 0x7F} but previous messages on this connection had version {self.version}"
                    if (version & 0x7F) != self.version
                    else "malformed frame header"
                )
                self.send(stream, w.ERROR, w.error_body(w.PROTOCOL_ERROR, why))
                await self.writer.drain()
                return
            try:
                body = await self.reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            try:
                if flags & w.FLAG_COMPRESSION:
                    if not self.lz4:
                        raise w.ProtocolError("compression was not negotiated")
                    body = w.lz4_decompress(body)
                self.shared.metrics.request(ENDPOINT)
                await self.handle(stream, opcode, w.Reader(body), bool(flags & w.FLAG_CUSTOM_PAYLOAD))
            except w.ProtocolError as exc:
                self.shared.metrics.error(ENDPOINT)
                self.send(stream, w.ERROR, w.error_body(w.PROTOCOL_ERROR, str(exc)))
                await self.writer.drain()
                raise w.CloseConnection from None
            except (w.CloseConnection, asyncio.IncompleteReadError, ConnectionError, TimeoutError):
                raise  # the connection ends
            except Exception as exc:  # the request's error; a bug is a server error, never a drop
                self.shared.metrics.error(ENDPOINT)
                if not isinstance(exc, QueryError | ChangefeedError | sqlite3.Error):
                    _log.error("internal error answering a CQL request", exc_info=exc)
                code, message, extra = error_of(exc)
                self.send(stream, w.ERROR, w.error_body(code, message, extra))
            await self.drain()

    async def handle(self, stream: int, opcode: int, r: w.Reader, payload: bool) -> None:
        if payload:
            r.string_map()  # custom payloads are accepted and ignored
        if opcode == w.QUERY:
            query = r.long_string()
            params = self._query_params(r)
            await self.run_query(stream, query, None, params)
        elif opcode == w.PREPARE:
            query = r.long_string()
            r.done()
            await self.prepare(stream, query)
        elif opcode == w.EXECUTE:
            pid = r.short_bytes()
            params = self._query_params(r)
            prep = self.shared.prepared.get(pid)
            if prep is None:
                raise QueryError(
                    w.UNPREPARED,
                    f"Prepared query with ID {pid.hex()} not found (either the query was not prepared on this host "
                    "(maybe the host has been restarted?) or you have prepared too many queries and it has been "
                    "evicted from the internal cache)",
                    w.Writer().short_bytes(pid).getvalue(),
                )
            await self.run_query(stream, prep.query, prep, params)
        elif opcode == w.BATCH:
            await self.batch(stream, r)
        elif opcode == w.REGISTER:
            kinds = r.string_list()
            r.done()
            unknown = [k for k in kinds if k not in ("TOPOLOGY_CHANGE", "STATUS_CHANGE", "SCHEMA_CHANGE")]
            if unknown:
                raise w.ProtocolError(f"Invalid value '{unknown[0]}' for Type")
            self.events.update(kinds)
            self.send(stream, w.READY, b"")
        elif opcode == w.OPTIONS:
            self.send(stream, w.SUPPORTED, w.Writer().string_multimap(w.OPTIONS_ANSWER).getvalue())
        elif opcode == w.STARTUP:
            raise w.ProtocolError("Unexpected message STARTUP, the connection is already initialized")
        else:
            raise w.ProtocolError(f"Unknown opcode {opcode}")

    def _query_params(self, r: w.Reader) -> dict[str, Any]:
        out: dict[str, Any] = {"consistency": r.consistency()}
        flags = r.byte()
        values: list[Any] = []
        names: list[str] | None = None
        if flags & w.Q_VALUES:
            n = r.short()
            names = [] if flags & w.Q_NAMES else None
            for _ in range(n):
                if names is not None:
                    names.append(r.string())
                values.append(r.value())
        out["values"], out["names"] = values, names
        out["skip_metadata"] = bool(flags & w.Q_SKIP_METADATA)
        out["page_size"] = r.int() if flags & w.Q_PAGE_SIZE else -1
        out["paging_state"] = r.bytes_() if flags & w.Q_PAGING_STATE else None
        if flags & w.Q_SERIAL_CONSISTENCY:
            r.consistency()
        if flags & w.Q_DEFAULT_TIMESTAMP:
            r.long()
        r.done()
        return out

    # ------------------------------------------------------------------ statements
    def _parse(self, query: str) -> ast.Statement:
        try:
            stmts = parse(query, "cql")
        except SyntaxError_:
            unbuilt = checks.unbuilt_statement(query)
            if unbuilt is None:
                raise
            raise InvalidStatement(f"{unbuilt} is not supported by this endpoint") from None
        if len(stmts) != 1:
            raise InvalidStatement("expected exactly one statement" if stmts else "empty query")
        return stmts[0]

    def _prepare_sync(self, query: str) -> Prepared:
        assert self.conn is not None
        session = self.conn.session
        keyspace = session.keyspace
        pid = hashlib.md5((keyspace or "").encode() + b"\x00" + query.encode()).digest()
        hit = self.shared.prepared.get(pid)
        if hit is not None:
            return hit
        stmt = self._parse_for_query(query)
        self.conn.db.refresh_catalog()
        specs, pk_at = bind_specs(session, stmt)
        inline = runs_inline(session, [stmt]) and not isinstance(stmt, ast.Select | ast.CqlSelect)
        prep = Prepared(pid, query, keyspace, stmt, specs, pk_at, [decoder(s.type) for s in specs], inline)
        with self.shared.lock:
            self.shared.prepared[pid] = prep
            while len(self.shared.prepared) > PREPARED_MAX:
                self.shared.prepared.popitem(last=False)
        return prep

    async def prepare(self, stream: int, query: str) -> None:
        prep = await self.call(self._prepare_sync, query)
        body = w.Writer().int(w.PREPARED).short_bytes(prep.id)
        # bind-variable metadata: flags, count, pk count + indexes, then the column specs
        body.int(w.M_GLOBAL_TABLES_SPEC if prep.specs else 0).int(len(prep.specs))
        if self.version >= 4:
            body.int(len(prep.pk_at))
            for i in prep.pk_at:
                body.short(i)
        if prep.specs:
            body.string(prep.specs[0].keyspace).string(prep.specs[0].table)
            for s in prep.specs:
                body.string(s.name).raw(s.type.option())
        # result metadata: left to each EXECUTE (No_metadata), which always describes its rows
        body.int(w.M_NO_METADATA).int(0)
        self.send(stream, w.RESULT, body.getvalue())

    def _bound(self, prep: Prepared | None, params: dict[str, Any]) -> tuple[ast.Statement | None, list[Any]]:
        """The prepared statement and its decoded values; with unset values, the statement
        without what they would have written (:mod:`unset`), None when nothing is left."""
        values = self._bind(prep, params)
        if prep is None:
            return None, values
        unset = frozenset(i for i, v in enumerate(values) if v is w.UNSET)
        if not unset:
            return prep.stmt, values
        stmt = without_unset(prep.stmt, unset, [s.name for s in prep.specs])
        return stmt, [None if v is w.UNSET else v for v in values]

    def _bind(self, prep: Prepared | None, params: dict[str, Any]) -> list[Any]:
        raw: list[Any] = params["values"]
        names: list[str] | None = params["names"]
        if prep is None:
            if raw:
                raise InvalidStatement("bound values need a prepared statement (PREPARE, then EXECUTE)")
            return []
        if names is not None:
            order = {s.name: i for i, s in enumerate(prep.specs)}
            placed: list[Any] = [w.UNSET] * len(prep.specs)
            for n, v in zip(names, raw, strict=True):
                if n not in order:
                    raise InvalidStatement(f"Invalid named value: no bind variable named {n}")
                placed[order[n]] = v
            raw = placed
        if len(raw) != len(prep.specs):
            raise InvalidStatement(
                f"There were {len(prep.specs)} markers(?) in CQL but {len(raw)} bound variables"
            )
        out: list[Any] = []
        for i, v in enumerate(raw):
            if v is None or v is w.UNSET:
                if v is w.UNSET and isinstance(
                    prep.stmt, ast.Select | ast.CqlSelect | ast.Delete | ast.InsertJson
                ):
                    raise InvalidStatement(f"Invalid unset value for column {prep.specs[i].name}")
                out.append(v)  # an unset one stays so: ``_bound`` leaves its column alone
                continue
            try:
                out.append(prep.decoders[i](v))
            except TypeMismatch as exc:
                raise InvalidStatement(
                    f"Exception while binding column {prep.specs[i].name}: {exc}"
                ) from None
        return out

    async def run_query(self, stream: int, query: str, prep: Prepared | None, params: dict[str, Any]) -> None:
        assert self.conn is not None
        if prep is None and params["values"]:
            prep = await self.call(self._prepare_sync, query)
        bound, values = self._bound(prep, params)
        if prep is not None and bound is None:  # an UPDATE whose every value was unset: nothing to do
            self.send(stream, w.RESULT, w.Writer().int(w.VOID).getvalue())
            return
        stmt = bound if bound is not None else await self.call(self._parse_for_query, query)
        if prep is not None and prep.keyspace is not None and self.conn.session.keyspace is None:
            self.conn.session.keyspace = prep.keyspace
        checks.check_consistency(stmt, params["consistency"])
        if isinstance(stmt, ast.Select | ast.CqlSelect):
            await self.select(stream, query, stmt, values, params)
            return
        res, changes = await self._run_write(stmt, values, prep is not None and prep.inline)
        if isinstance(stmt, ast.UseKeyspace):
            body = w.Writer().int(w.SET_KEYSPACE).string(self.conn.session.keyspace or "")
            self.send(stream, w.RESULT, body.getvalue())
            return
        if changes:
            # events first (the log tables a CDC option creates too), then the answer, as ScyllaDB
            published: list[SchemaChange] = []
            if self.shared.publish is not None:
                with contextlib.suppress(Exception):  # a failed catalog read: the statement's own
                    published = await self.shared.publish(self)
            for change in changes:  # (also when nothing changed: CREATE .. IF NOT EXISTS, as ScyllaDB)
                if change not in published:
                    self.shared.broadcast(change)
            self.send(
                stream,
                w.RESULT,
                w.Writer().int(w.SCHEMA_CHANGE).raw(schema_change_body(changes[0])).getvalue(),
            )
            return
        if res.columns:  # LWT: [applied]
            types = result_types(self.conn.session, stmt, res.columns, res.types, res.rows)
            ks, table = split_name(self.conn.session, statement_table(stmt))
            self.send(stream, w.RESULT, rows_body(res.columns, types, (ks, table), res.rows, None))
            return
        self.send(stream, w.RESULT, w.Writer().int(w.VOID).getvalue())

    async def _run_write(
        self, stmt: ast.Statement, values: Sequence[Any], inline: bool
    ) -> tuple[Result, list[SchemaChange]]:
        """Run a non-SELECT statement: short ones on the loop (waiting there a short while for
        another writer, then on the pool: ``gate_wait.run_inline``), the others on the pool."""
        assert self.conn is not None
        if inline:
            return await gate_wait.run_inline(self.conn.db, self.call, self._execute, stmt, values)
        return await self.call(self._execute, stmt, values)

    def _parse_for_query(self, query: str) -> ast.Statement:
        stmt = self._parse(query)
        if isinstance(stmt, ast.Show):
            # ScyllaDB before server-side DESCRIBE answered it so; cqlsh then describes the
            # schema from the driver's metadata (system_schema), as it does with those versions.
            raise SyntaxError_(f"line 1:0 no viable alternative at input '{query.split()[0]}'")
        assert self.conn is not None
        stmt = checks.typed_literals(self.conn.session, stmt)
        check_filtering(self.conn.session, stmt)
        return stmt

    def _execute(self, stmt: ast.Statement, values: Sequence[Any]) -> tuple[Result, list[SchemaChange]]:
        """Run a statement; returns its result and the schema changes it made (for a CREATE TABLE
        in a keyspace that did not exist yet, the keyspace's creation first)."""
        assert self.conn is not None
        session = self.conn.session
        changes: list[SchemaChange] = []
        if isinstance(stmt, ast.CreateTable):
            session.db.refresh_catalog()
            ks, _ = split_name(session, stmt.name)
            if (
                ks
                and ks not in session.db.keyspaces
                and not any(t.keyspace == ks for t in session.db.tables())
            ):
                changes.append(SchemaChange("CREATED", "KEYSPACE", ks))
        try:
            res = session.execute(stmt, values)
        except DuplicateObject as exc:
            if not isinstance(stmt, ast.CreateTable | ast.CreateKeyspace):
                raise
            if isinstance(stmt, ast.CreateTable):
                ks, name = split_name(session, stmt.name)
            else:
                ks, name = session.ident(stmt.name), ""
            raise QueryError(
                w.ALREADY_EXISTS, str(exc), w.Writer().string(ks).string(name).getvalue()
            ) from None
        change = schema_change(session, stmt)
        if change is not None:
            changes.append(change)
        return res, changes

    # ------------------------------------------------------------------ SELECT and paging
    def has_reread(self, tables: set[tuple[str, str]]) -> bool:
        return ("", "*") in self.reread or tables <= self.reread

    def _note_schema_read(self, query: str, stmt: ast.Select | ast.CqlSelect) -> None:
        """A driver re-reading a table's schema (its last query of a refresh, ``system_schema.views``
        by keyspace and name, or all of it)."""
        assert self.conn is not None
        if split_name(self.conn.session, stmt.table) != ("system_schema", "views"):
            return
        if stmt.where is None:
            self.reread.add(("", "*"))
        else:
            ks = _QUOTED_KS.search(query)
            name = _QUOTED_VIEW.search(query)
            if ks is None or name is None:
                return
            self.reread.add((ks.group(1), name.group(1)))
        self.reread_event.set()

    async def select(
        self,
        stream: int,
        query: str,
        stmt: ast.Select | ast.CqlSelect,
        values: list[Any],
        params: dict[str, Any],
    ) -> None:
        assert self.conn is not None
        if stmt.table is not None and not values:
            self._note_schema_read(query, stmt)
        page_size: int = params["page_size"]
        state: bytes | None = params["paging_state"]
        key = hashlib.md5(query.encode() + repr(values).encode()).digest()[:8]
        paged: Paged | None = None
        offset = 0
        if state:
            if len(state) != 16 or state[:8] != key:
                raise w.ProtocolError("Invalid value for the paging state")
            offset = struct.unpack(">q", state[8:])[0]
            with self.shared.lock:
                paged = self.shared.paged.get(state[:8] + struct.pack(">q", offset))
        if paged is None:
            paged = await self.call(self._run_select, stmt, values, key)
        rows = paged.rows
        end = len(rows) if page_size <= 0 else min(len(rows), offset + page_size)
        next_state = None
        if end < len(rows):
            next_state = key + struct.pack(">q", end)
            paged.at = time.monotonic()
            with self.shared.lock:
                self.shared.paged[next_state] = paged
                self.shared.paged.move_to_end(next_state)
                self._expire_paged()
        if state:
            with self.shared.lock:
                self.shared.paged.pop(state, None)
        skip = bool(params["skip_metadata"])
        ready = paged.ahead.pop((offset, page_size, skip), None)
        if ready is not None:
            body = await ready
        else:
            body = await self._encode_page(paged, offset, end, next_state, skip)
        self.send(stream, w.RESULT, body)
        if next_state is not None:  # encode the next page while the client takes this one
            nxt_end = min(len(rows), end + page_size)
            after = key + struct.pack(">q", nxt_end) if nxt_end < len(rows) else None
            paged.ahead.clear()
            paged.ahead[(end, page_size, skip)] = asyncio.ensure_future(
                self._encode_page(paged, end, nxt_end, after, skip)
            )

    async def _encode_page(self, paged: Paged, lo: int, hi: int, state: bytes | None, skip: bool) -> bytes:
        if hi - lo > 2000 and not paged.rows.cheap:
            return await self.call(page_body, paged, lo, hi, state, skip)
        return page_body(paged, lo, hi, state, skip)

    def _expire_paged(self) -> None:
        now = time.monotonic()
        while self.shared.paged:
            p = next(iter(self.shared.paged.values()))
            if len(self.shared.paged) > PAGED_RESULTS or now - p.at > PAGED_TTL_S:
                self.shared.paged.popitem(last=False)
            else:
                break

    def _run_select(self, stmt: ast.Select | ast.CqlSelect, values: Sequence[Any], key: bytes) -> Paged:
        assert self.conn is not None
        session = self.conn.session
        table = split_name(session, stmt.table)
        if table[1].endswith(LOG_SUFFIX) and isinstance(stmt, ast.Select):
            self._close_log(stmt)
            cols = select_log_columns(session, stmt, values)
            if cols is not None:  # a window of the log: encoded column-wise, pages are slices
                types = result_types(session, stmt, cols.names, cols.types, [])
                encoded = encode_rows(cols.values, types, cols.rows)
                return Paged(key, cols.names, types, table, ColumnarRows(encoded), time.monotonic())
        if table[1].endswith(LOG_SUFFIX) and isinstance(stmt, ast.CqlSelect):
            self._close_log(stmt.select)
        res = session.execute(stmt, values)
        types = result_types(session, stmt, res.columns, res.types, res.rows)
        checks.check_sums(stmt, types, res.rows)
        return Paged(key, res.columns, types, table, TupleRows(res.rows, types), time.monotonic())

    def _close_log(self, stmt: ast.Select) -> None:
        """Before reading a CDC log up to a time: make every commit at or below it visible.

        A writer takes its commit time when its transaction starts; a reader asking for changes up
        to a time could otherwise run while such a writer is still committing, and miss it for
        good (a CDC library never reads a window twice). Closing the clock (an empty write
        transaction, serialised after every writer in flight) makes every later commit newer
        than now, and everything at or below it visible to the read that follows."""
        assert self.conn is not None
        if stmt.where is None or "cdc$time" not in repr(stmt.where):
            return
        ts, _ = self.conn.db.close_timestamp()
        self.shared.closed_wall = max(self.shared.closed_wall, ts.wall)

    # ------------------------------------------------------------------ BATCH
    async def batch(self, stream: int, r: w.Reader) -> None:
        kind = r.byte()
        if kind not in (0, 1, 2):
            raise w.ProtocolError(f"Invalid BATCH message type {kind}")
        n = r.short()
        items: list[tuple[str | None, bytes | None, list[Any]]] = []
        for _ in range(n):
            k = r.byte()
            if k == 0:
                q: str | None = r.long_string()
                pid = None
            elif k == 1:
                q, pid = None, r.short_bytes()
            else:
                raise w.ProtocolError(f"Invalid query kind in BATCH messages. Must be 0 or 1 but got {k}")
            vals = [r.value() for _ in range(r.short())]
            items.append((q, pid, vals))
        r.consistency()
        flags = r.byte()
        if flags & w.Q_SERIAL_CONSISTENCY:
            r.consistency()
        if flags & w.Q_DEFAULT_TIMESTAMP:
            r.long()
        if flags & w.Q_NAMES:
            raise w.ProtocolError("named values are not supported in BATCH")
        r.done()
        bound: list[tuple[ast.Statement, list[Any]]] = []
        for q, pid, vals in items:
            if pid is not None:
                prep = self.shared.prepared.get(pid)
                if prep is None:
                    raise QueryError(
                        w.UNPREPARED,
                        f"Prepared query with ID {pid.hex()} not found",
                        w.Writer().short_bytes(pid).getvalue(),
                    )
            else:
                assert q is not None
                prep = await self.call(self._prepare_sync, q) if vals else None
            if prep is not None:
                kept, values = self._bound(prep, {"values": vals, "names": None})
                if kept is None:
                    continue  # every value unset: nothing of it to write
                stmt = kept
            else:
                assert q is not None
                stmt = await self.call(self._parse, q)
                values = []
            check_batchable(stmt)
            bound.append((stmt, values))
        await self.call(self._run_batch, bound)
        self.send(stream, w.RESULT, w.Writer().int(w.VOID).getvalue())

    def _run_batch(self, bound: list[tuple[ast.Statement, list[Any]]]) -> None:
        """Every statement in one transaction: one commit time, one CDC batch (``cdc$batch_seq_no``
        numbering each partition's log rows in statement order)."""
        assert self.conn is not None
        session = self.conn.session
        session.begin()
        try:
            for stmt, values in bound:
                session.execute(stmt, values)
        except BaseException:
            session.rollback()
            raise
        session.commit()


_QUOTED_KS = re.compile(r"keyspace_name\s*=\s*'([^']*)'", re.IGNORECASE)
_QUOTED_VIEW = re.compile(r"view_name\s*=\s*'([^']*)'", re.IGNORECASE)


__all__ = ["CqlSession", "QueryError", "Shared", "error_of"]
