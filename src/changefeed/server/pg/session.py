"""One client connection after authentication: its engine session, session variables, prepared
statements and portals, and the simple and extended query protocols.

Where a statement goes (decided once per query text, cached):
- session statements (SET, SHOW <variable>, RESET, CANCEL QUERY, SHOW QUERIES ...) are answered
  by :mod:`changefeed.server.pg.session_commands`;
- statements naming ``pg_catalog``, ``information_schema`` or ``pg_*`` functions go to
  :mod:`changefeed.server.pg.catalog`;
- a core changefeed (``EXPERIMENTAL CHANGEFEED FOR``, ``CREATE CHANGEFEED`` without ``INTO``)
  streams rows from ``Connection.stream`` as they are produced (:mod:`.core_feeds`);
- ``COPY .. FROM STDIN`` / ``TO STDOUT`` runs the copy sub-protocol (:mod:`.copy`);
- pipelined single-row INSERTs are gathered into bulk writes (:mod:`.batch`);
- everything else runs on the engine session, ``$n`` parameters as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from changefeed.connection import Connection, Result
from changefeed.exceptions import ChangefeedError
from changefeed.observe import NULL_ENDPOINT_METRICS, EndpointMetrics
from changefeed.server import gate_wait
from changefeed.server.pg import (
    batch as batches,
    catalog,
    core_feeds,
    describe,
    implicit,
    normalise as norm_,
    protocol as p,
    session_commands,
    sql_prepare,
    type_lookup,
    types as t,
)
from changefeed.server.pg.commands import parse_command, split_statements
from changefeed.server.pg.copy import copy_in, copy_out
from changefeed.server.pg.copy_spec import parse_copy
from changefeed.server.pg.errors import (
    AbortedTransaction,
    DuplicateCursor,
    DuplicateStatement,
    UndefinedCursor,
    UndefinedStatement,
    sqlstate_of,
)
from changefeed.server.pg.inline import bulk_insert, runs_inline
from changefeed.server.pg.params import param_count
from changefeed.server.pg.portals import Batch, BatchRows, Portal, Prepared, Running, new_query_id
from changefeed.server.pg.sessions import Registry
from changefeed.server.pg.values import (
    Encoder,
    as_described,
    column_oids,
    data_rows,
    encoders,
    fmt_of,
    normalise_tag,
)
from changefeed.server.pg.variables import REPORTED, SERVER_VERSION, defaults
from changefeed.server.pg.write_group import WriteGroup, groups
from changefeed.server.pool_calls import PoolCalls
from changefeed.sql import ast
from changefeed.sql.parser import parse
from changefeed.sql.statements.point import PointRead, plan_point

T = TypeVar("T")

#: Seconds to wait for a client that stopped reading before its connection is closed.
WRITE_TIMEOUT = 30.0


#: Bytes of DataRows buffered before waiting for the client to take them.
FLUSH_BYTES = 256 * 1024
#: Rows encoded at a time; results larger than this are encoded on the pool, chunk by chunk.
ENCODE_CHUNK = 2000
#: Parsed query texts kept per connection.
PARSE_CACHE = 256
#: Result shapes (column types and formats -> encoders, RowDescription) kept per connection.
SHAPES = 64


@dataclass(frozen=True)
class Backend:
    """What a session needs of its endpoint: the database, the engine thread pool, the registry."""

    db: Path
    pool: Executor
    registry: Registry
    metrics: EndpointMetrics = NULL_ENDPOINT_METRICS
    #: The process's commit groups for short autocommit writes (None: each runs alone).
    writes: WriteGroup | None = None


class PgSession:
    def __init__(
        self,
        endpoint: Backend,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        user: str,
        params: dict[str, str],
        peer: object,
    ) -> None:
        self.endpoint = endpoint
        self.reader = reader
        self.messages = p.MessageStream(reader)
        self.writer = writer
        self.user = user
        self.peer = peer
        self.startup = params
        self.vars = defaults(user, SERVER_VERSION)
        self.pid, self.secret = endpoint.registry.new_key()
        self.conn: Connection | None = None
        self.prepared: dict[str, Prepared] = {}
        #: The declared parameter types of statements made by SQL's PREPARE (``sql_prepare``).
        self.sql_types: dict[str, list[str]] = {}
        self.portals: dict[str, Portal] = {}
        self.cache: OrderedDict[str, Prepared] = OrderedDict()
        #: Per normalised text: whether its statements run on the loop, and its point-read plan
        #: (see ``from_template``).
        self.template_plans: dict[str, tuple[bool, PointRead | None]] = {}
        #: Result shapes (see :meth:`shape`).
        self.shapes: dict[tuple[Any, ...], tuple[list[int], list[Encoder], list[int], bytes]] = {}
        self.running: Running | None = None
        self.cancelled = threading.Event()
        self.closing = False
        self.session_id = uuid.uuid4().hex
        self.loop = asyncio.get_running_loop()
        self.calls = PoolCalls(self.loop, self.endpoint.pool)
        self.out: list[bytes] = []  # messages not yet handed to the transport
        #: Executes of one single-row INSERT/UPSERT in an explicit transaction, not run yet: they
        #: run as one bulk write (see :meth:`flush_batch`).
        self.batch: Batch | None = None
        #: An implicit transaction is open: the pipelined Executes up to the next Sync run in one
        #: transaction, committed at the Sync (rolled back after an error), as in PostgreSQL.
        self.implicit = False
        self.pending = 0  # bytes in ``out``

    # ------------------------------------------------------------------ lifecycle
    async def open(self) -> None:
        self.conn = await self.call(Connection, self.endpoint.db, user=self.user)
        self.conn.session.cancelled = self.cancelled  # a CancelRequest ends a waiting statement too
        # Group commit on the event loop: commits leave their durability ticket on the database,
        # and flush() awaits it before any reply goes out (an acknowledged commit is durable).
        self.conn.db.defer_durable = True
        for name, value in self.startup.items():
            if name in ("user", "database", "replication"):
                continue
            if name == "options":
                continue
            key = session_commands.var_name(self.vars, name)
            self.vars[key] = value
        self.vars["database"] = self.startup.get("database", "defaultdb") or "defaultdb"
        self.vars["client_encoding"] = "UTF8"
        out = [p.auth_ok()]
        out += [p.parameter_status(n, self.vars[n]) for n in REPORTED]
        out.append(p.backend_key_data(self.pid, self.secret))
        out.append(p.ready_for_query(b"I"))
        self.writer.write(b"".join(out))
        await self.writer.drain()
        self.endpoint.registry.sessions[self.pid] = self

    async def close(self) -> None:
        self.endpoint.registry.sessions.pop(self.pid, None)
        self.cancel()
        await batches.settle(self)
        await self.settle()
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await self.call(conn.close)

    def terminate(self) -> None:
        """Server shutdown: end this connection; its open transaction is rolled back on close."""
        self.closing = True
        self.cancel()
        with contextlib.suppress(Exception):
            if self.conn is not None and self.conn.db.pending_durable:
                self.conn.db.sync()
            self.writer.write(b"".join(self.out))
            self.out.clear()
            self.writer.write(
                p.error_response(
                    "57P01", "terminating connection due to administrator command", severity="FATAL"
                )
            )
        self.writer.close()

    def cancel(self) -> None:
        self.cancelled.set()
        conn = self.conn
        if conn is not None and self.running is not None:
            with contextlib.suppress(Exception):
                conn.db.conn.interrupt()

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the worker pool (:class:`PoolCalls`: :meth:`close` waits for it)."""
        return await self.calls.run(fn, *args, **kwargs)

    async def settle(self) -> None:
        """Wait until no call of this session is running on the worker pool."""
        await self.calls.settle()

    @property
    def alone(self) -> bool:
        """Whether this is the only session of its process: nobody else's statement waits on
        the loop while it runs something there."""
        return len(self.endpoint.registry.sessions) == 1

    @property
    def txn_status(self) -> bytes:
        s = self.conn.session if self.conn is not None else None
        if s is None or not s.in_transaction:
            return b"I"
        return b"E" if s.aborted else b"T"

    # ------------------------------------------------------------------ output
    def send(self, data: bytes) -> None:
        """Queue a message; it goes out at the next :meth:`flush` that writes (Sync, Flush, the
        end of a simple query, or a full buffer), in one system call with its neighbours, as
        PostgreSQL's own backend buffers its output."""
        self.out.append(data)
        self.pending += len(data)

    async def flush(self, force: bool = False) -> None:
        if self.out and (force or self.pending >= FLUSH_BYTES):
            await self.durable()
            data = self.out[0] if len(self.out) == 1 else b"".join(self.out)
            self.out.clear()
            self.pending = 0
            self.writer.write(data)
            transport = self.writer.transport
            if transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:
                # The client reads slower than we write: wait (bounded) for it to catch up.
                await asyncio.wait_for(self.writer.drain(), WRITE_TIMEOUT)

    async def durable(self) -> None:
        """Wait until every commit this session made is durable (group commit, see
        ``changefeed.sqlite_wal``), and every commit of this server it may have read: SQLite shows
        a commit once its frames are in the WAL, before the sync, and PostgreSQL never shows a
        reader a commit that a power loss could take back. If a sync fails, the replies queued so
        far are dropped and the connection ends with a FATAL error, as PostgreSQL does when it
        cannot flush its WAL."""
        db = self.conn.db if self.conn is not None else None
        if db is None or db.syncer is None:
            return
        ticket, db.pending_durable = db.pending_durable, 0
        if not ticket:
            if self.conn is not None and self.conn.session.txn is not None:
                # Inside a write transaction (which holds the write lock: no waiting here): its
                # commit's sync covers whatever it read.
                return
            ticket = db.syncer.pending()  # the commits this reply may show
            if not ticket:
                return
        try:
            if self.alone:
                # The only session of this process: nobody else's statement waits on the loop, so
                # it syncs here, without asking the loop's sync process and waiting for its
                # answer (a hand-over that costs more than the sync itself on one client).
                db.syncer.wait(ticket)
            else:
                await db.syncer.wait_async(ticket)
        except ChangefeedError as exc:
            self.out.clear()
            self.pending = 0
            self.writer.write(p.error_response("58030", str(exc), severity="FATAL"))
            self.closing = True
            raise ConnectionError(str(exc)) from None

    def send_error(self, exc: BaseException) -> None:
        self.endpoint.metrics.error("pg")
        code, message = self.error_of(exc)
        if isinstance(exc, ChangefeedError):
            self.send(
                p.error_response(
                    code, message, context=exc.context, detail=exc.detail, constraint=exc.constraint
                )
            )
        else:
            self.send(p.error_response(code, message))
        if self.conn is not None and self.conn.session.in_transaction:
            self.conn.session.aborted = True

    def error_of(self, exc: BaseException) -> tuple[str, str]:
        return sqlstate_of(exc, cancelled=self.cancelled.is_set(), session_id=self.session_id)

    # ------------------------------------------------------------------ main loop
    async def run(self) -> None:
        skipping = False  # after an error in the extended protocol: until Sync
        while not self.closing:
            try:
                kind, msg = await self.messages.read()
            except p.ProtocolViolation as exc:
                self.send(p.error_response(exc.code, str(exc), severity="FATAL"))
                await self.flush(True)
                return
            if kind == b"X":
                return
            if skipping and kind not in (b"S",):
                continue
            if kind in (b"Q", b"E"):
                self.endpoint.metrics.request("pg")
            if self.batch is not None:
                try:
                    if batches.batch_message(self, kind, msg.data):
                        taken = 1 + batches.take_pipelined(self)
                        batches.start_chunk(self, taken)
                        if len(self.batch.rows) >= batches.BATCH_ROWS:
                            await batches.flush_batch(self)
                        else:
                            await batches.linger(self, taken)
                        continue
                    await batches.flush_batch(self)
                except p.CLIENT_GONE:
                    raise
                except Exception as exc:  # the statement's error (XX000 for a bug: error_of)
                    self.send_error(await self.flush_before(exc))
                    skipping = True
                    await self.flush(True)  # the error goes out now (see below)
                if skipping and kind not in (b"S",):
                    continue
            try:
                if kind == b"Q":
                    if self.implicit:  # a simple query ends the pipeline's implicit transaction
                        await implicit.end(self)
                    await self.simple_query(msg.cstr())
                    await self.flush(True)
                elif kind == b"P":
                    await self.on_parse(msg)
                elif kind == b"B":
                    await self.on_bind(msg)
                elif kind == b"D":
                    await self.on_describe(msg)
                elif kind == b"E":
                    await self.on_execute(msg)
                elif kind == b"C":
                    self.on_close(msg)
                elif kind == b"H":
                    await self.flush(True)
                elif kind == b"S":
                    skipping = False
                    self.portals.pop("", None)
                    if self.implicit:
                        await implicit.end(self)
                    self.send(p.ready_for_query(self.txn_status))
                    await self.flush(True)
                elif kind in (b"d", b"c", b"f"):
                    pass  # COPY data outside COPY: ignored, as PostgreSQL does
                else:
                    raise p.ProtocolViolation(f"invalid frontend message type {kind[0]}")
            except p.ProtocolViolation as exc:
                self.send(p.error_response(exc.code, str(exc), severity="FATAL"))
                await self.flush(True)
                return
            except p.CLIENT_GONE:
                raise
            except (
                Exception
            ) as exc:  # the statement's error (XX000 for a bug: error_of), never a dropped connection
                # A Bind taken after the batch's first Execute may have failed: its rows first.
                self.send_error(await self.flush_before(exc) if self.batch is not None else exc)
                if kind == b"Q":
                    self.send(p.ready_for_query(self.txn_status))
                else:
                    # Messages up to Sync are skipped, a Flush among them too; the error is sent
                    # at once, as PostgreSQL sends it: a client that sent Parse, Describe and
                    # Flush (asyncpg's prepare) waits for it before it sends Sync.
                    skipping = True
                await self.flush(True)

    async def flush_before(self, exc: BaseException) -> BaseException:
        """A message taken into the batch failed (a Bind whose parameters do not decode): as in
        PostgreSQL, the rows before it run and get their replies first; the error to send is
        ``exc``, or the earlier one of a row that failed. The transaction is aborted either way."""
        if self.batch is not None:
            try:
                await batches.flush_batch(self)
            except p.CLIENT_GONE:
                raise
            except Exception as first:
                exc = first
            self.batch = None
        if self.conn is not None and self.conn.session.in_transaction:
            self.conn.session.aborted = True
        return exc

    # ------------------------------------------------------------------ classification
    def classify(self, sql: str) -> Prepared:
        hit = self.cache.get(sql)
        if hit is not None:
            self.cache.move_to_end(sql)
            return hit
        prep = self._classify(sql)
        if prep.kind != "command":
            self.cache[sql] = prep
            if len(self.cache) > PARSE_CACHE:
                self.cache.popitem(last=False)
        return prep

    def _classify(self, sql: str) -> Prepared:
        pieces = split_statements(sql)
        if not pieces:
            return Prepared(sql, "empty")
        if len(pieces) == 1:
            cmd = parse_command(pieces[0])
            if cmd is not None:
                return Prepared(sql, "command", command=cmd)
            spec = parse_copy(pieces[0])
            if spec is not None:
                return Prepared(sql, "copy", copy=spec)
            if catalog.wants(pieces[0]):
                return Prepared(sql, "catalog")
        stmts = parse(sql, "sql")
        if len(stmts) == 1 and isinstance(stmts[0], ast.CreateChangefeed) and stmts[0].sink is None:
            return Prepared(sql, "stream", stmts=stmts)
        assert self.conn is not None
        # Whether it is short depends on the tables' keys: a connection's first statement comes
        # before any transaction has read the catalog.
        self.conn.db.refresh_catalog()
        if len(stmts) == 1 and (norm := norm_.normalise(sql)) is not None and norm_.cached(norm) is None:
            norm_.template(norm, stmts)  # the next texts of this shape skip the parse
        inline = runs_inline(self.conn.session, stmts)
        return Prepared(
            sql, "engine", stmts=stmts, inline=inline, bulk_insert=not inline and bulk_insert(stmts)
        )

    def from_template(self, sql: str) -> Prepared | None:
        """``sql`` from the cache of normalised statements (see normalise.py), or None."""
        norm = norm_.normalise(sql)
        if norm is None:
            return None
        tmpl = norm_.cached(norm)
        if not isinstance(tmpl, norm_.Template):
            return None
        known = self.template_plans.get(norm.key)
        if known is None:
            assert self.conn is not None
            # Whether it is short depends on the tables' keys: a session's first statement may
            # come before anything of it read the catalog (the template is process-wide).
            self.conn.db.refresh_catalog()
            inline = runs_inline(self.conn.session, tmpl.stmts)
            if self.conn.session.in_transaction:
                point = None  # planned outside a transaction, next time
            else:
                point = plan_point(self.conn.session, tmpl.stmts[0]) if inline else None
                self.template_plans[norm.key] = (inline, point)
            known = (inline, point)
        inline, point = known
        if point is not None or tmpl.runs_planned:  # bound only when it runs the general path (to_run)
            return Prepared(
                sql,
                "engine",
                stmts=tmpl.stmts,
                inline=inline,
                point=point,
                planned=True,
                template=tmpl,
                values=norm.values,
            )
        return Prepared(sql, "engine", stmts=norm_.bind(tmpl, norm.values), inline=inline, planned=True)

    # ------------------------------------------------------------------ simple query
    async def simple_query(self, sql: str) -> None:
        pieces = split_statements(sql)
        if not pieces:
            self.send(p.EMPTY_QUERY)
        for piece in pieces:
            prep = self.cache.get(piece) or self.from_template(piece)
            if prep is None:
                prep = await self.call(self.classify, piece)
            res = await self.execute(prep, [])
            if res is not None:
                await self.send_result(res, prep, [], describe=True, limit=0)
        self.send(p.ready_for_query(self.txn_status))

    # ------------------------------------------------------------------ execution
    async def execute(self, prep: Prepared, params: list[Any]) -> Result | None:
        """Run a prepared statement; None when it already sent its own output (a stream)."""
        assert self.conn is not None
        session = self.conn.session
        if prep.kind == "empty":
            return Result(status="")
        first = prep.stmts[0] if prep.stmts else None
        if session.aborted and not isinstance(first, ast.Commit | ast.Rollback | ast.RollbackToSavepoint):
            raise AbortedTransaction(
                "current transaction is aborted, commands ignored until end of transaction block"
            )
        if isinstance(first, ast.Commit) and session.aborted:
            await self.call(session.rollback)
            return Result(status="ROLLBACK")
        if prep.kind == "stream":
            await core_feeds.run_stream(self, prep)
            return None
        self.cancelled.clear()
        self.running = Running(new_query_id(), prep.sql, dt.datetime.now(dt.UTC))
        try:
            if prep.copy is not None:
                return await (copy_out if prep.copy.to else copy_in)(self, prep.copy)
            if prep.kind == "command":
                assert prep.command is not None
                if prep.command.kind == "prepare":
                    return await sql_prepare.prepare(self, prep.command)
                if prep.command.kind == "execute":
                    return await sql_prepare.execute(self, prep.command)
                if prep.command.kind == "deallocate":
                    return sql_prepare.deallocate(self, prep.command.name)
                spanning = await session_commands.run_cluster_command(self, prep.command)
                return spanning if spanning is not None else session_commands.run_command(self, prep.command)
            if prep.kind == "catalog":
                if type_lookup.is_type_lookup(prep.sql):
                    return type_lookup.answer(params)
                return await self.call(catalog.run, self.conn, prep.sql, params, self.vars)
            if prep.inline:
                if not prep.planned and not session.in_transaction:
                    prep.planned = True
                    if len(prep.stmts) == 1 and isinstance(prep.stmts[0], ast.Select):
                        prep.point = plan_point(session, prep.stmts[0])
                if prep.point is not None and not session.in_transaction:
                    got = prep.point.run(session, prep.values if prep.template is not None else params)
                    if got is not None:
                        return got
                    self.forget_plan(prep)  # stale (the catalog moved) or not for these values
            stmts, args, bound = self.to_run(prep, params)
            if prep.inline:
                writes = self.endpoint.writes
                if (
                    writes is not None
                    and not session.in_transaction
                    and not session.refuses_writes
                    and not self.alone
                    and groups(stmts)
                ):
                    # With the other sessions' writes of this moment, in one commit.
                    res = await writes.run(self.user, stmts[0], args, self.conn.db, bound)
                    if res is not None:
                        return res
                # On the loop; waiting for another worker's write there, then on the pool.
                return await gate_wait.run_inline(
                    self.conn.db, self.call, self._run_engine, stmts, args, bound
                )
            if prep.bulk_insert and self.alone:
                # Long, but nobody else's statement waits on the loop (as a pipelined batch).
                return await gate_wait.run_inline(
                    self.conn.db, self.call, self._run_engine, stmts, args, bound
                )
            return await self.call(self._run_engine, stmts, args, bound)
        finally:
            self.running = None

    def forget_plan(self, prep: Prepared) -> None:
        """A point-read plan that declined: planned again at the next run if the catalog moved
        (a plan that declines only these values stays)."""
        point = prep.point
        if point is None or self.conn is None:
            return
        db = self.conn.db
        db.refresh_catalog()
        if db.catalog_version != point.version:
            prep.point, prep.planned = None, False
            for key, (_, p_) in list(self.template_plans.items()):
                if p_ is point:
                    del self.template_plans[key]

    @staticmethod
    def to_run(
        prep: Prepared, params: list[Any]
    ) -> tuple[list[ast.Statement], Sequence[Any], Callable[[], ast.Statement] | None]:
        """The statements, parameters and ``bound`` (``Session.execute``'s) that run ``prep``: a
        simple-protocol text taken from its normalised template runs as the template with its
        constants for parameters when it is one INSERT (one compiled plan for every text of that
        shape), else bound (its constants written in as the literals they are)."""
        tmpl = prep.template
        if tmpl is None:
            return prep.stmts, params, None
        values = prep.values
        if tmpl.runs_planned:
            return list(tmpl.stmts), values, lambda: norm_.bind(tmpl, values)[0]
        return norm_.bind(tmpl, values), [], None

    def _run_engine(
        self,
        stmts: list[ast.Statement],
        params: Sequence[Any],
        bound: Callable[[], ast.Statement] | None = None,
    ) -> Result:
        assert self.conn is not None
        res = Result()
        for stmt in stmts:
            res = self.conn.session.execute(stmt, params, bound=bound)
            res.status = normalise_tag(res, stmt)
        return res

    def shape(self, res: Result, formats: list[int]) -> tuple[list[int], list[Encoder], list[int], bytes]:
        """A result's column OIDs, encoders, format codes and RowDescription: kept per columns,
        types and formats when every column's type is known (a statement run again and again
        has the same shape), else worked out from the rows."""
        types = res.types
        key = None
        if len(types) == len(res.columns) and None not in types:
            key = (tuple(res.columns), tuple(types), tuple(formats))
            hit = self.shapes.get(key)
            if hit is not None:
                return hit
        oids = column_oids(types, res.rows, len(res.columns))
        encs, fmts = encoders(oids, formats)
        made = (oids, encs, fmts, p.row_description(list(zip(res.columns, oids, fmts, strict=True))))
        if key is not None:
            if len(self.shapes) >= SHAPES:
                self.shapes.pop(next(iter(self.shapes)))
            self.shapes[key] = made
        return made

    async def send_result(
        self,
        res: Result,
        prep: Prepared,
        formats: list[int],
        *,
        describe: bool,
        limit: int,
        portal: Portal | None = None,
    ) -> None:
        if res.columns:
            oids, encs, fmts, description = self.shape(res, formats)
            if describe:
                self.send(description)
            elif portal is not None and not portal.described and prep.row_oids is not None:
                # The client learned the columns from Describe of the statement: their types then.
                oids, encs, fmts = as_described(oids, encs, fmts, prep.row_oids)
            start = portal.pos if portal is not None else 0
            end = len(res.rows) if limit <= 0 else min(len(res.rows), start + limit)
            rows = res.rows

            def encode(lo: int, hi: int) -> bytes:
                return data_rows(rows[lo:hi], encs, oids, fmts)

            if end - start <= ENCODE_CHUNK:
                self.send(encode(start, end))
            else:  # large results: encoded chunk by chunk on the pool, so the loop serves others meanwhile
                for lo in range(start, end, ENCODE_CHUNK):
                    self.send(await self.call(encode, lo, min(end, lo + ENCODE_CHUNK)))
                    await self.flush()
            if portal is not None:
                portal.pos = end
                if end < len(res.rows):
                    self.send(p.PORTAL_SUSPENDED)
                    return
        if prep.kind == "empty":
            self.send(p.EMPTY_QUERY)
            return
        self.send(p.command_complete(res.status or normalise_tag(res, prep.stmts[0] if prep.stmts else None)))

    # ------------------------------------------------------------------ session statements
    # ------------------------------------------------------------------ extended protocol
    async def on_parse(self, msg: p.Reader) -> None:
        name = msg.cstr()
        sql = msg.cstr()
        n = msg.int16()
        oids = [msg.uint32() for _ in range(max(n, 0))]
        msg.done()
        if name and name in self.prepared:
            raise DuplicateStatement(f'prepared statement "{name}" already exists')
        prep = self.cache.get(sql)
        if prep is None:
            prep = await self.call(self.classify, sql)
        if prep.param_oids != oids:
            prep = prep.retyped(oids)
        self.prepared[name] = prep
        self.send(p.PARSE_COMPLETE)

    async def on_bind(self, msg: p.Reader) -> None:
        self.bind(msg.data)
        self.send(p.BIND_COMPLETE)

    def bind(self, body: bytes) -> Portal:
        portal_name, stmt_name, pf, raw, rf = p.parse_bind(body)
        prep = self.prepared.get(stmt_name)
        if prep is None:
            raise UndefinedStatement(f'prepared statement "{stmt_name}" does not exist')
        oids = prep.param_oids
        params = [
            t.decode_param(v, oids[i] if i < len(oids) else 0, fmt_of(pf, i) == 1, i)
            for i, v in enumerate(raw)
        ]
        if portal_name and portal_name in self.portals:
            raise DuplicateCursor(f'portal "{portal_name}" already exists')
        portal = self.portals[portal_name] = Portal(prep, params, list(rf))
        portal.param_formats = pf
        portal.bind_head = body[: body.index(0, body.index(0) + 1) + 3 + 2 * len(pf)]
        return portal

    async def on_describe(self, msg: p.Reader) -> None:
        what = msg.byte()
        name = msg.cstr()
        msg.done()
        if what == b"S":
            prep = self.prepared.get(name)
            if prep is None:
                raise UndefinedStatement(f'prepared statement "{name}" does not exist')
            n = max(param_count(prep.sql), len(prep.param_oids))
            inferred = await self.call(describe.param_types_of, self, prep, n)
            oids = [
                (prep.param_oids[i] if i < len(prep.param_oids) and prep.param_oids[i] else inferred[i])
                for i in range(n)
            ]
            if oids != prep.param_oids:  # Bind decodes by what was described
                prep = prep.retyped(oids)
                self.prepared[name] = prep
            self.send(p.parameter_description(oids))
            cols = await describe.result_columns(self, prep)
            if cols:
                # Rows of its portals are sent as these columns' types (see send_result).
                self.prepared[name] = prep.described_as(tuple(o for _, o in cols))
            self.send(p.row_description([(c, o, 0) for c, o in cols]) if cols else p.NO_DATA)
            return
        if what != b"P":
            raise p.ProtocolViolation(f"invalid DESCRIBE message subtype {what!r}")
        portal = self.portals.get(name)
        if portal is None:
            raise UndefinedCursor(f'portal "{name}" does not exist')
        prep = portal.prepared
        if prep.kind == "stream":
            fmts = [fmt_of(portal.formats, i) for i in range(3)]
            self.send(
                p.row_description(
                    list(zip(["table", "key", "value"], [t.TEXT, t.BYTEA, t.BYTEA], fmts, strict=True))
                )
            )
            portal.described = True
            return
        if portal.result is None and batches.batchable(self, prep):
            self.send(p.NO_DATA)  # runs at Execute, with the others of its batch
            portal.described = True
            return
        if self.batch is not None:
            await batches.flush_batch(self)
        if portal.result is None:
            await implicit.begin(self, prep, at_describe=True)
            portal.result = await self.execute(prep, portal.params)
        described = portal.result
        if described is not None and described.columns:
            self.send(self.shape(described, portal.formats)[3])
        else:
            self.send(p.NO_DATA)
        portal.described = True

    async def on_execute(self, msg: p.Reader) -> None:
        name = msg.cstr()
        limit = msg.int32()
        msg.done()
        portal = self.portals.get(name)
        if portal is None:
            raise UndefinedCursor(f'portal "{name}" does not exist')
        prep = portal.prepared
        # Any row limit: a batchable statement returns no rows (pgjdbc's executeBatch asks for one).
        if portal.result is None and batches.batchable(self, prep) and name == "":
            # Its BindComplete (and NoData) went out already: only its CommandComplete is due.
            self.batch = Batch(prep, BatchRows([portal.params]), [b""], shape=batches.run_shape(portal))
            batches.start_chunk(self, 1 + batches.take_pipelined(self))
            if len(self.batch.rows) >= batches.BATCH_ROWS:
                await batches.flush_batch(self)
            return
        if self.batch is not None:
            await batches.flush_batch(self)
        if prep.kind == "stream":
            await core_feeds.run_stream(self, prep, portal.formats, describe=False, params=portal.params)
            return
        if portal.result is None:
            await implicit.begin(self, prep)
            portal.result = await self.execute(prep, portal.params)
        res = portal.result
        if res is None:
            return
        await self.send_result(res, prep, portal.formats, describe=False, limit=limit, portal=portal)

    def on_close(self, msg: p.Reader) -> None:
        what = msg.byte()
        name = msg.cstr()
        msg.done()
        if what == b"S":
            self.prepared.pop(name, None)
            self.sql_types.pop(name, None)
        elif what == b"P":
            self.portals.pop(name, None)
        else:
            raise p.ProtocolViolation(f"invalid CLOSE message subtype {what!r}")
        self.send(p.CLOSE_COMPLETE)
