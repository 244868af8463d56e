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
import itertools
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from changefeed.connection import Result
from changefeed.exceptions import ChangefeedError
from changefeed.server import gate_wait
from changefeed.server.pg import protocol as p, types as t
from changefeed.server.pg.portals import Portal, Prepared, Running, RunShape, new_query_id
from changefeed.server.pg.values import fmt_of, normalise_tag
from changefeed.sql import ast
from changefeed.sql.param_columns import INTS, STRS, ColumnFacts, ParamColumns

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

#: Batched Executes run once this many are waiting.
BATCH_ROWS = 4096
#: Rows gathered before a part of the batch starts on the pool while the rest arrives.
CHUNK_ROWS = 256
#: Groups of one size from which the fixed-layout path is worth its set-up (:func:`_same_size`).
SAME_SIZE_ROWS = 8
#: Rows taken from one read below which the client is taken to flush row by row (see linger).
LINGER_ROWS = 64
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
        and stmt.on_conflict_update is None
        and engine.in_transaction
        and not engine.aborted
        and engine.statements.handler(stmt).plan_many is not None
    )


def run_shape(portal: Portal) -> RunShape | None:
    """The shape of the Bind that made ``portal``, which the following Binds of a pipelined run
    repeat (None if it has no Bind bytes to compare with)."""
    if not portal.bind_head:
        return None
    n = len(portal.params)
    oids = portal.prepared.param_oids
    rf = portal.formats
    return RunShape(
        bind_head=portal.bind_head,
        param_formats=portal.param_formats,
        head=portal.bind_head + _H.pack(n),
        tail=struct.pack(f"!h{len(rf)}h", len(rf), *rf),
        oids=tuple(oids[i] if i < len(oids) else 0 for i in range(n)),
        binary=tuple(fmt_of(portal.param_formats, i) == 1 for i in range(n)),
        result_formats=tuple(rf),
    )


def batch_message(session: PgSession, kind: bytes, body: bytes) -> bool:
    """Take one message into the batch if it belongs there: a Bind of the batch's statement to
    the unnamed portal, a Describe or an Execute of that portal. False: the batch runs first.
    A Bind whose parameters do not decode raises here, as PostgreSQL fails the Bind: the rows
    before it still run (see ``PgSession.run``)."""
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
        batch.pre.append(b"".join(batch.pending))
        batch.pending.clear()
        return True
    return False


def take_pipelined(session: PgSession) -> int:
    """Take into the batch the messages that belong there and have already arrived, without a
    trip through the main loop each (a pipelining client sends thousands per segment): runs of
    Bind[/Describe]/Execute are read straight from the buffer (:func:`scan_run`), anything else
    message by message. The rows taken."""
    stream = session.messages
    batch = session.batch
    if batch is None:
        return 0
    before = len(batch.rows)
    while session.batch is batch and len(batch.rows) < BATCH_ROWS:
        if scan_run(session):
            continue
        nxt = stream.peek()
        if nxt is None or not batch_message(session, *nxt):
            break
        stream.advance()
    return len(batch.rows) - before


def scan_run(session: PgSession) -> bool:
    """Take the whole Bind/[Describe]/Execute groups of the batch's statement that are in the
    buffer, in a few passes over all of them instead of a parse per message: the buffer is split
    at the Execute (and Describe) that end each group, every piece is checked to be exactly one
    Bind of the run's shape (its length field, statement, formats), and the parameters are cut
    out and decoded column by column (:func:`_same_size` or :func:`_any_size`, then :func:`_decode`). A group that differs
    in any way (another statement or portal, other formats, a row limit, Describe in some groups
    and not others, a value that does not decode) ends the run there and is left to
    :func:`batch_message`, message by message. True if it took any."""
    batch = session.batch
    stream = session.messages
    if batch is None or batch.shape is None:
        return False
    shape = batch.shape
    buf, pos = stream.buf, stream.pos
    room = BATCH_ROWS - len(batch.rows)
    if room <= 0 or len(buf) - pos < 5 or buf[pos] != 0x42:  # Bind
        return False
    (length,) = _I.unpack_from(buf, pos + 1)
    b_end = pos + 1 + length
    described = buf.startswith(_DESCRIBE_UNNAMED, b_end)
    at = b_end + len(_DESCRIBE_UNNAMED) if described else b_end
    # The Execute with its row limit as the first group has it: any limit (pgjdbc asks for one
    # row in a batch), as the statement returns none; every group must repeat it.
    execute = buf[at : at + _EXECUTE_LEN]
    if len(execute) < _EXECUTE_LEN or not execute.startswith(_EXECUTE_UNNAMED_HEAD):
        return False
    term = _DESCRIBE_UNNAMED + execute if described else execute
    group = b_end + len(term) - pos
    same = min(room, (len(buf) - pos) // group)
    cols, n, known = _same_size(buf, pos, same, group, term, shape) if same >= SAME_SIZE_ROWS else ([], 0, {})
    sizes: list[int] | None = None  # each group's Bind, when they differ in length
    if n < SAME_SIZE_ROWS:
        # At most ``room`` groups; a bound on the bytes looked at (values vary in length).
        region = buf[pos : pos + max(4 * group * room, 1 << 16)]
        pieces = region.split(term, room)
        pieces.pop()  # whatever follows the last whole group
        if not pieces:
            return False
        sizes = list(map(len, pieces))
        del pieces
        cols, n, known = _any_size(region, sizes, len(term), shape)
        if not n:
            return False
    run = _decode(cols, shape, n, known)
    n = len(run)
    if not n:
        return False
    stream.pos = pos + (sum(sizes[:n]) + n * len(term) if sizes is not None else n * group)
    batch.rows.add(run)
    batch.pre.extend([_PRE_DESCRIBED if described else p.BIND_COMPLETE] * n)
    # The unnamed portal is the last group's, as if each Bind had been run.
    portal = session.portals[""] = Portal(batch.prepared, list(run[-1]), list(shape.result_formats))
    portal.described = described
    portal.bind_head = shape.bind_head
    portal.param_formats = shape.param_formats
    return True


def _same_size(
    buf: bytes, pos: int, k: int, group: int, term: bytes, shape: RunShape
) -> tuple[list[list[Any]], int, dict[int, ColumnFacts | int]]:
    """The parameter columns of the groups from ``pos`` that are each ``group`` bytes long with
    every byte the same as in the first one except its values' (type byte, length field, head,
    each value's length, tail, Describe/Execute), at most ``k`` of them; how many (0: not even
    two); and what is known of each column (:func:`_fixed_width_column`). The
    first group starts at a message and is whole; each that matches it byte for byte outside its
    values ends where the next begins: each counted is whole. The groups are read as the rows of
    a NumPy byte grid: the fixed bytes of all compared at once, integers read in their wire width
    and the other values cut as fixed-width byte strings, a column at a time."""
    head, tail = shape.head, shape.tail
    first = buf[pos : pos + group]
    if not (first.startswith(head, 5) and first.endswith(tail + term)):
        return [], 0, {}
    spans = _value_spans(first, 5 + len(head), len(shape.oids), group - len(term) - len(tail))
    if spans is None:
        return [], 0, {}
    grid = np.frombuffer(buf, dtype=np.uint8, count=k * group, offset=pos).reshape(k, group)
    fixed = np.ones(group, dtype=bool)
    for lo, ln in spans:
        if ln > 0:
            fixed[lo : lo + ln] = False
    idx = np.flatnonzero(fixed)
    same = (grid[:, idx] == grid[0, idx]).all(axis=1)
    n = k if bool(same.all()) else int(np.argmin(same))
    if n < 2:
        return [], 0, {}
    cols: list[list[Any]] = []
    known: dict[int, ColumnFacts | int] = {}
    for i, (lo, ln) in enumerate(spans):
        if ln < 0:
            cols.append([None] * n)
            continue
        col, known[i] = _fixed_width_column(grid[:n, lo : lo + ln], ln, shape, i)
        cols.append(col)
    return cols, n, known


def _fixed_width_column(
    block: Any, width: int, shape: RunShape, i: int
) -> tuple[list[Any], ColumnFacts | int]:
    """Parameter ``i`` of every row, all ``width`` bytes (the rows of ``block``, a NumPy byte
    grid): binary integers read in their width, decoded, with their facts (the range of their
    wire type: a column as wide takes them unchecked, a narrower one checks each); else the raw
    values, with their width."""
    wire = t.BINARY_INTS.get(shape.oids[i]) if shape.binary[i] else None
    if wire is not None and wire.width == width:
        ints = np.ascontiguousarray(block).view(wire.numpy).ravel()
        return ints.tolist(), ColumnFacts(INTS, wire.lo, wire.hi)
    raw = block.tobytes()
    if width and 0 not in raw:  # as NumPy byte strings (which would drop trailing NULs)
        return np.frombuffer(raw, dtype=f"S{width}").tolist(), width
    return [raw[r * width : (r + 1) * width] for r in range(block.shape[0])], width


def _any_size(
    region: bytes, sizes: list[int], tlen: int, shape: RunShape
) -> tuple[list[list[Any]], int, dict[int, ColumnFacts | int]]:
    """The parameter columns of the groups that ``region`` holds back to back (Binds of
    ``sizes`` bytes, each followed by the ``tlen`` bytes of its Describe/Execute), as far as each
    is exactly one Bind of ``shape``; how many; and what is known of each column. The first
    group starts at a message; a Bind whose type byte, length field (which must count its piece
    to the end), head, value lengths and tail all hold ends at the message's end, so the next
    starts at the next message (a value holding the Execute's bytes cuts its piece short, which
    stops the run there). Every check is a NumPy operation over all groups at once, one
    parameter column at a time."""
    n = len(sizes)
    flat = np.frombuffer(region, dtype=np.uint8)
    last = len(flat) - 4  # the highest index a 4-byte read may start at
    size = np.asarray(sizes, dtype=np.int64)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(size[:-1] + tlen, out=starts[1:])
    head = np.frombuffer(shape.head, dtype=np.uint8)
    tail = np.frombuffer(shape.tail, dtype=np.uint8)
    least = 5 + len(head) + len(tail)
    if len(flat) < least + tlen:
        return [], 0, {}
    ok = size >= least
    at = np.minimum(starts, len(flat) - least)  # in range for any piece (a short one fails anyway)
    ok &= flat[at] == 0x42
    ok &= _int32_at(flat, at + 1) == size - 1
    ok &= (flat[at[:, None] + (5 + np.arange(len(head)))] == head).all(axis=1)
    limit = starts + size - len(tail)
    if len(tail):
        tail_at = np.clip(limit, 0, len(flat) - len(tail))
        ok &= (flat[tail_at[:, None] + np.arange(len(tail))] == tail).all(axis=1)
    off = starts + 5 + len(head)
    spans: list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = []
    for _ in shape.oids:
        ok &= off + 4 <= limit
        ln = _int32_at(flat, np.minimum(off, last))
        ok &= ln >= -1
        ln = np.where(ok, ln, 0)
        spans.append((off + 4, ln))
        off = np.minimum(off + 4 + np.maximum(ln, 0), last)
    ok &= off == limit
    n = n if bool(ok.all()) else int(np.argmin(ok))
    if not n:
        return [], 0, {}
    cols: list[list[Any]] = []
    known: dict[int, ColumnFacts | int] = {}
    for i, (vs, vl) in enumerate(spans):
        vs, vl = vs[:n], vl[:n]
        width = int(vl[0])
        if bool((vl == width).all()):
            if width < 0:
                cols.append([None] * n)
                continue
            col, known[i] = _fixed_width_column(flat[vs[:, None] + np.arange(width)], width, shape, i)
            cols.append(col)
            continue
        known[i] = int(vl.max())
        cols.append(
            [None if ln < 0 else region[a : a + ln] for a, ln in zip(vs.tolist(), vl.tolist(), strict=True)]
        )
    return cols, n, known


def _int32_at(flat: np.ndarray[Any, Any], at: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The big-endian signed 32-bit integers at each index ``at`` of the byte array ``flat``."""
    return flat[at[:, None] + _FOUR].view(">i4").ravel().astype(np.int64)


def _value_spans(piece: bytes, off: int, nparams: int, end: int) -> list[tuple[int, int]] | None:
    """Where each of one Bind's parameter values starts in ``piece`` and its length (-1: NULL),
    if they fill it exactly from ``off`` to ``end``."""
    out = []
    for _ in range(nparams):
        if off + 4 > end:
            return None
        (ln,) = _I.unpack_from(piece, off)
        if ln < -1:
            return None
        off += 4
        out.append((off, ln))
        off += max(ln, 0)
    return out if off == end else None


def _decode(
    cols: list[list[Any]], shape: RunShape, n: int, known: dict[int, ColumnFacts | int]
) -> ParamColumns:
    """The ``n`` rows' decoded parameters as columns, with what is known of each (``known``:
    the facts of a column decoded already, or the longest raw value of one that is not): all of
    the rows, or those before the first row with a value that does not decode (that row's Bind
    fails when taken on its own)."""
    kinds = list(zip(shape.oids, shape.binary, strict=True))
    try:
        out = [col if _done(known, i) else t.decode_column(col, *kinds[i]) for i, col in enumerate(cols)]
    except (ChangefeedError, ValueError, TypeError, LookupError):
        for r in range(n):
            try:
                for i, col in enumerate(cols):
                    if not _done(known, i):
                        t.decode_param(col[r], *kinds[i], i)
            except (ChangefeedError, ValueError, TypeError, LookupError):
                n = r
                break
        if not n:
            return ParamColumns([[] for _ in cols], [None] * len(cols), 0)
        out = [
            col[:n] if _done(known, i) else t.decode_column(col[:n], *kinds[i]) for i, col in enumerate(cols)
        ]
    facts: list[ColumnFacts | None] = []
    for i, col in enumerate(out):
        k = known.get(i)
        if isinstance(k, ColumnFacts):
            facts.append(k)
        elif k is not None and kinds[i][0] in t.TEXT_OIDS and None not in col:
            facts.append(ColumnFacts(STRS, 0, k))  # a string is no longer than its UTF-8 bytes
        else:
            facts.append(None)
    return ParamColumns(out, facts, n)


def _done(known: dict[int, ColumnFacts | int], i: int) -> bool:
    """Whether column ``i`` is decoded already."""
    return isinstance(known.get(i), ColumnFacts)


_FOUR = np.arange(4)
_I = struct.Struct("!i")
_H = struct.Struct("!h")
#: Describe and Execute (no row limit) of the unnamed portal, as the wire carries them.
_DESCRIBE_UNNAMED = b"D\x00\x00\x00\x06P\x00"
#: An Execute of the unnamed portal up to its row limit, and its whole length with the limit.
_EXECUTE_UNNAMED_HEAD = b"E\x00\x00\x00\x09\x00"
_EXECUTE_LEN = len(_EXECUTE_UNNAMED_HEAD) + 4
_PRE_DESCRIBED = p.BIND_COMPLETE + p.NO_DATA


def start_chunk(session: PgSession, taken: int) -> None:
    """Start writing the rows gathered so far while the client sends the rest: a client that
    pipelines thousands of rows keeps sending while the first ones are written (at most one chunk
    in flight; the replies still go out when the batch ends). Not when the write would run on the
    loop (:func:`write_rows`) and the client writes many rows at a time (``taken`` of them in the
    last read: asyncpg builds its whole batch before sending it): the rest is already on its way,
    and one write of them all costs less than several."""
    batch = session.batch
    if batch is None or session.conn is None or len(batch.rows) - batch.executed < CHUNK_ROWS:
        return
    if taken >= LINGER_ROWS and session.alone:
        return
    if batch.inflight is not None:
        if not batch.inflight.done() or batch.inflight.exception() is not None:
            return  # one at a time; an error is the batch's at its end
        batch.inflight = None
    rows = batch.rows.since(batch.executed)
    batch.inflight_from = batch.executed
    batch.executed = len(batch.rows)
    stmt = batch.prepared.stmts[0]
    running = session.running = Running(new_query_id(), batch.prepared.sql, dt.datetime.now(dt.UTC))
    session.cancelled.clear()
    fut = write_rows(session, stmt, rows)  # close() waits for it

    def done(_: object) -> None:
        if session.running is running:
            session.running = None

    fut.add_done_callback(done)
    batch.inflight = fut
    batch.chunks += 1


def write_rows(session: PgSession, stmt: ast.Statement, rows: Sequence[Sequence[Any]]) -> asyncio.Future[int]:
    """The engine's bulk write of ``rows`` (``execute_many``): on the loop itself when this is
    the only session of its process (nobody else's statement waits on the loop, and handing the
    rows to a pool thread and the result back costs two thread switches and two hand-overs of the
    interpreter lock), started at once when the write lock is free, else once another writer
    ends it (``gate_wait.run_inline``); otherwise on the pool."""
    assert session.conn is not None
    engine = session.conn.session
    if not session.alone:
        return session.calls.start(engine.execute_many, stmt, rows)
    fut: asyncio.Future[int] = session.loop.create_future()
    try:
        ran, n = session.conn.db.run_if_free(engine.execute_many, stmt, rows)
    except Exception as exc:  # the caller's await raises it
        fut.set_exception(exc)
        return fut
    if ran:
        assert n is not None
        fut.set_result(n)
        return fut
    # Another session or process is writing: wait for it (on the loop, then on the pool).
    return asyncio.ensure_future(
        gate_wait.run_inline(session.conn.db, session.call, engine.execute_many, stmt, rows, refused=True)
    )


async def linger(session: PgSession, taken: int) -> None:
    """With a batch open, no whole message left in the buffer and only a few rows (``taken``)
    in what was just read, leave the socket unread for :data:`LINGER_S`: a client that flushes
    every row (psycopg's ``executemany`` in pipeline mode sends each Bind/Describe/Execute in a
    segment of its own) then has its next rows read together and taken by one :func:`scan_run`,
    instead of waking the loop, reading and dispatching once per row. Nothing is owed to the
    client meanwhile: its replies wait for the batch's end anyway (Sync, Flush or another
    statement, whose arrival is at most this late). A client that writes many rows at a time
    (asyncpg) is read on at once: the rest of its write is already on its way."""
    if session.batch is None or taken >= LINGER_ROWS or session.messages.has_message():
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
    first Execute of the part that failed gets it (the rows before it get their replies) and
    the rest are skipped to Sync: the transaction is aborted, as it would be had one of the rows
    failed on its own."""
    batch, session.batch = session.batch, None
    if batch is None or session.conn is None:
        return
    prep = batch.prepared
    engine = session.conn.session
    stmt = prep.stmts[0]
    failed_at = batch.inflight_from
    try:
        if batch.inflight is not None:
            await batch.inflight
        rows = batch.rows.since(batch.executed)
        failed_at = batch.executed
        batch.executed = len(batch.rows)
        if len(rows) == 1 and not batch.chunks:
            # Nothing was pipelined behind it: run as any statement (inline if short).
            await session.execute(prep, list(rows[0]))
        elif rows:
            session.cancelled.clear()
            session.running = Running(new_query_id(), prep.sql, dt.datetime.now(dt.UTC))
            try:
                await write_rows(session, stmt, rows)
            finally:
                session.running = None
    except BaseException as exc:
        engine.aborted = True
        if isinstance(exc, ChangefeedError) and exc.row is not None:
            failed_at = min(failed_at + exc.row, len(batch.pre) - 1)  # the row the engine names
        if batch.pre:
            # As PostgreSQL answers a pipeline: every row before the failing one done, its own
            # BindComplete, then (raised to the caller) its error.
            session.send(replies(batch.pre[:failed_at], _tag(stmt)) + batch.pre[failed_at])
        raise
    session.send(replies(batch.pre, _tag(stmt)))
    if batch.pending:
        session.send(b"".join(batch.pending))


def replies(pre: list[bytes], tag: bytes) -> bytes:
    """Each row's replies: what is due before its CommandComplete, then the CommandComplete (one
    multiplication per run of rows with the same replies)."""
    return b"".join((r + tag) * sum(1 for _ in g) for r, g in itertools.groupby(pre))


def _tag(stmt: ast.Statement) -> bytes:
    return p.command_complete(normalise_tag(Result(status="INSERT 1"), stmt))
