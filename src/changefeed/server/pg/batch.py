"""Pipelined bulk writes through the extended protocol.

A client that pipelines Bind/Execute pairs of one single-row ``INSERT``/``UPSERT`` (psycopg's
``executemany``, JDBC batches) inside an explicit transaction gets them run as one bulk write
(``Session.execute_many``, the engine's compiled bulk path, as ``Connection.executemany`` in one
process) instead of one statement each. Their replies (BindComplete, NoData, CommandComplete) are
held back and sent in the order of the messages when the batch runs: at the first message that
does not belong to it (Sync, Flush, another statement) or at :data:`BATCH_ROWS` rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from changefeed.connection import Result
from changefeed.server.pg import protocol as p
from changefeed.server.pg import types as t
from changefeed.server.pg.portals import Batch, Portal, Prepared, Running, new_query_id
from changefeed.server.pg.values import fmt_of, normalise_tag
from changefeed.sql import ast

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

#: Batched Executes run once this many are waiting.
BATCH_ROWS = 4096
#: Rows gathered before a part of the batch starts on the pool while the rest arrives.
CHUNK_ROWS = 256
#: Seconds a batch whose client has sent nothing more yet leaves the socket unread (see linger).
LINGER_S = 0.0003


def batchable(session: PgSession, prep: Prepared) -> bool:
    """Executes of ``prep`` may wait to run together: a single-row INSERT/UPSERT of bound
    values without RETURNING, inside an explicit transaction (so running them together changes
    nothing a client can see: every reply comes before the transaction ends, and an error
    aborts the transaction either way)."""
    if prep.kind != "engine" or len(prep.stmts) != 1 or session.conn is None:
        return False
    stmt = prep.stmts[0]
    engine = session.conn.session
    return (
        isinstance(stmt, ast.Insert)
        and len(stmt.rows) == 1
        and not stmt.returning
        and not stmt.on_conflict_do_nothing  # its tag counts the rows each one wrote
        and engine.in_transaction
        and not engine.aborted
        and engine.statements.handler(stmt).plan_many is not None
    )


def batch_message(session: PgSession, kind: bytes, body: bytes) -> bool:
    """Take one message into the batch if it belongs there: a Bind of the batch's statement to
    the unnamed portal, a Describe or an Execute of that portal. False: the batch runs first."""
    batch = session.batch
    if batch is None:
        return False
    prep = batch.prepared
    if kind == b"B":
        if not body.startswith(b"\x00"):
            return False
        z = body.find(b"\x00", 1)
        if z < 0 or session.prepared.get(body[1:z].decode("utf-8", "replace")) is not prep:
            return False
        session.bind(body)
        batch.pending.append(p.BIND_COMPLETE)
        return True
    portal = session.portals.get("")
    if portal is None or portal.prepared is not prep or portal.result is not None:
        return False
    if kind == b"D" and body == b"P\x00":
        batch.pending.append(p.NO_DATA)
        portal.described = True
        return True
    if kind == b"E" and body.startswith(b"\x00") and len(body) == 5:
        batch.rows.append(portal.params)
        batch.replies.append(b"".join(batch.pending))
        batch.pending.clear()
        return True
    return False


def take_pipelined(session: PgSession) -> None:
    """Take into the batch the messages that belong there and have already arrived, without a
    trip through the main loop each (a pipelining client sends thousands per segment): runs of
    Bind[/Describe]/Execute are read straight from the buffer (:func:`scan_run`), anything else
    message by message."""
    stream = session.messages
    while session.batch is not None and len(session.batch.rows) < BATCH_ROWS:
        if scan_run(session):
            continue
        nxt = stream.peek()
        if nxt is None or not batch_message(session, *nxt):
            return
        stream.advance()


def scan_run(session: PgSession) -> bool:
    """Take whole Bind/[Describe]/Execute groups of the batch's statement from the buffer as they
    are, keeping the rows' raw parameters in one flat list (decoded column by column when the
    rows go to the engine): the per-row work is a few slices. A group that differs in any way
    (another statement or portal, other parameter formats, a row limit, Describe in some groups
    and not others) is left to :func:`batch_message`. True if it took any."""
    batch = session.batch
    stream = session.messages
    if batch is None or batch.formats is None:
        return False
    buf, pos = stream.buf, stream.pos
    end_buf = len(buf)
    head = batch.bind_head  # portal "" + statement name + the parameter format codes
    hlen = len(head)
    nparams = batch.nparams
    flat = batch.raw
    room = BATCH_ROWS - len(batch.rows)
    taken = 0
    described: bool | None = None
    unpack_i, unpack_h = _I.unpack_from, _H.unpack_from
    params = range(nparams)
    while taken < room and end_buf - pos >= 5 and buf[pos] == 0x42:  # Bind
        (length,) = unpack_i(buf, pos + 1)
        b_end = pos + 1 + length
        if b_end > end_buf or not buf.startswith(head, pos + 5):
            break
        off = pos + 5 + hlen
        if b_end - off < 2 or unpack_h(buf, off)[0] != nparams:
            break
        off += 2
        mark = len(flat)
        try:
            for _ in params:
                (ln,) = unpack_i(buf, off)
                off += 4
                if ln < 0:
                    flat.append(None)
                else:
                    flat.append(buf[off : off + ln])
                    off += ln
            (nr,) = unpack_h(buf, off)
        except struct.error:
            del flat[mark:]
            break
        if off > b_end or nr < 0 or off + 2 + 2 * nr != b_end:
            del flat[mark:]  # malformed: batch_message reports it
            break
        nxt = b_end
        has_d = buf.startswith(_DESCRIBE_UNNAMED, nxt)
        if has_d:
            nxt += len(_DESCRIBE_UNNAMED)
        if (described is not None and has_d != described) or not buf.startswith(_EXECUTE_UNNAMED, nxt):
            del flat[mark:]
            break
        described = has_d
        pos = nxt + len(_EXECUTE_UNNAMED)
        taken += 1
    if not taken:
        return False
    stream.pos = pos
    batch.rows.extend([None] * taken)
    batch.replies.extend([p.BIND_COMPLETE + p.NO_DATA if described else p.BIND_COMPLETE] * taken)
    # The unnamed portal is the last group's, as if each Bind had been run.
    last = list(
        decode_rows(flat[len(flat) - nparams :], nparams, batch.prepared.param_oids, batch.formats)[0]
    )
    portal = session.portals[""] = Portal(batch.prepared, last, list(batch.result_formats))
    portal.described = bool(described)
    return True


def decode_rows(
    flat: list[bytes | None], width: int, oids: list[int], formats: tuple[int, ...]
) -> list[Sequence[Any]]:
    """Bound parameter values of many rows, given row after row in ``flat`` (``width`` each),
    column by column (as ``types.decode_param`` decodes each: integers and text in one pass per
    column, other types value by value)."""
    if not width:
        return [() for _ in range(len(flat))] if flat else []
    cols = [
        _decode_column(flat[i::width], oids[i] if i < len(oids) else 0, fmt_of(list(formats), i) == 1)
        for i in range(width)
    ]
    return list(zip(*cols, strict=True))  # rows as tuples: the engine reads them by position


def _decode_column(col: list[bytes | None], oid: int, binary: bool) -> list[Any]:
    try:
        if oid in _INTS:
            if not binary:
                return [None if v is None else int(v) for v in col]
            code, size = _INT_CODES[oid]
            if None not in col:
                joined = b"".join(col)  # type: ignore[arg-type]
                if len(joined) == size * len(col):  # every value of the type's width: one unpack
                    return list(struct.unpack(f"!{len(col)}{code}", joined))
            if all(v is None or len(v) == size for v in col):  # else decode_param names the bad one
                signed = oid != t.OID
                return [None if v is None else int.from_bytes(v, "big", signed=signed) for v in col]
        if oid in _STRS:  # text in either format is its UTF-8 bytes
            return [None if v is None else v.decode() for v in col]
    except (ValueError, UnicodeDecodeError):
        pass  # the value at fault gets its error from decode_param below
    return [t.decode_param(v, oid, binary) for v in col]


_INTS = frozenset({t.INT8, t.INT4, t.INT2, t.OID})
#: The binary width of each integer type, and its ``struct`` code.
_INT_CODES = {t.INT8: ("q", 8), t.INT4: ("i", 4), t.INT2: ("h", 2), t.OID: ("I", 4)}
_STRS = frozenset({0, t.TEXT, t.VARCHAR, t.UNKNOWN})
_I = struct.Struct("!i")
_H = struct.Struct("!h")
#: Describe and Execute (no row limit) of the unnamed portal, as the wire carries them.
_DESCRIBE_UNNAMED = b"D\x00\x00\x00\x06P\x00"
_EXECUTE_UNNAMED = b"E\x00\x00\x00\x09\x00\x00\x00\x00\x00"


def take_rows(batch: Batch, hi: int) -> list[Sequence[Any]]:
    """The parameters of rows ``batch.executed`` up to ``hi``, decoded (rows taken raw by
    :func:`scan_run` column by column); they count as executed from here."""
    lo = batch.executed
    part = batch.rows[lo:hi]
    raw_n = sum(1 for r in part if r is None)
    width = batch.nparams
    start = batch.raw_used * width
    decoded = iter(
        decode_rows(
            batch.raw[start : start + raw_n * width], width, batch.prepared.param_oids, batch.formats or ()
        )
    )
    batch.raw_used += raw_n
    batch.executed = hi
    if raw_n == len(part):
        return list(decoded)
    return [r if r is not None else next(decoded) for r in part]


def start_chunk(session: PgSession) -> None:
    """Start writing the rows gathered so far on the pool while the loop reads the rest: a client
    that pipelines thousands of rows keeps sending while the first ones are written (at most one
    chunk in flight; the replies still go out when the batch ends)."""
    batch = session.batch
    if batch is None or session.conn is None or len(batch.rows) - batch.executed < CHUNK_ROWS:
        return
    if batch.inflight is not None:
        if not batch.inflight.done() or batch.inflight.exception() is not None:
            return  # one at a time; an error is the batch's at its end
        batch.inflight = None
    rows = take_rows(batch, len(batch.rows))
    engine = session.conn.session
    stmt = batch.prepared.stmts[0]
    running = session.running = Running(new_query_id(), batch.prepared.sql, dt.datetime.now(dt.UTC))
    session.cancelled.clear()
    fut = session.calls.start(engine.execute_many, stmt, rows)  # close() waits for it

    def done(_: object) -> None:
        if session.running is running:
            session.running = None

    fut.add_done_callback(done)
    batch.inflight = fut
    batch.chunks += 1


async def linger(session: PgSession) -> None:
    """With a batch open and no whole message left in the buffer, leave the socket unread for
    :data:`LINGER_S`: a client that flushes every row (psycopg's ``executemany`` in pipeline
    mode sends each Bind/Describe/Execute in a segment of its own) then has its next rows read
    together and taken by one :func:`scan_run`, instead of waking the loop, reading and
    dispatching once per row. Nothing is owed to the client meanwhile: its replies wait for the
    batch's end anyway (Sync, Flush or another statement, whose arrival is at most this late)."""
    if session.batch is None or session.messages.has_message():
        return
    transport = cast(asyncio.Transport, session.writer.transport)  # the connection's, both ways
    transport.pause_reading()
    try:
        await asyncio.sleep(LINGER_S)
    finally:
        if not transport.is_closing():
            transport.resume_reading()


async def settle(session: PgSession) -> None:
    """Wait for the batch's chunk in flight, if any (before the session's connection closes)."""
    batch = session.batch
    if batch is not None and batch.inflight is not None:
        with contextlib.suppress(BaseException):
            await batch.inflight


async def flush_batch(session: PgSession) -> None:
    """Run the batched Executes as one ``execute_many`` (the engine's bulk write, as
    ``Connection.executemany`` in one process) and send each its replies. psycopg's
    ``executemany`` and JDBC batches pipeline Bind/Execute pairs up to one Sync, so a
    1,000-row transaction costs one bulk write instead of 1,000 statements. On an error the
    first Execute gets it and the rest are skipped to Sync: the transaction is aborted, as it
    would be had one of the rows failed on its own."""
    batch, session.batch = session.batch, None
    if batch is None or session.conn is None:
        return
    prep = batch.prepared
    engine = session.conn.session
    stmt = prep.stmts[0]
    try:
        if batch.inflight is not None:
            await batch.inflight
        rows = take_rows(batch, len(batch.rows))
        if len(rows) == 1 and not batch.chunks:
            # Nothing was pipelined behind it: run as any statement (inline if short).
            await session.execute(prep, list(rows[0]))
        elif rows:
            session.cancelled.clear()
            session.running = Running(new_query_id(), prep.sql, dt.datetime.now(dt.UTC))
            try:
                await session.call(engine.execute_many, stmt, rows)
            finally:
                session.running = None
    except BaseException:
        engine.aborted = True
        if batch.replies:
            session.send(batch.replies[0])
        raise
    tag = p.command_complete(normalise_tag(Result(status="INSERT 1"), stmt))
    session.send(b"".join(r + tag for r in batch.replies))
    if batch.pending:
        session.send(b"".join(batch.pending))
