"""``COPY .. FROM STDIN`` and ``COPY .. TO STDOUT`` on a PostgreSQL endpoint session.

FROM STDIN: the table and columns are resolved and the INSERT privilege checked first (an error
then is the statement's, before any data); the session answers CopyInResponse and reads
CopyData until CopyDone (the rows written, ``COPY n``) or CopyFail (57014, nothing written).
Rows are decoded a column at a time from their text or binary form by the columns' types and
written :data:`CHUNK_BYTES` of input at a time by the engine's bulk write (the table's one-row
INSERT through ``Session.execute_many``, as a pipelined batch is, ``batch.write_rows``), all in
one transaction: the client's own, or one begun for the COPY and committed at CopyDone, so a COPY
writes all of its rows or none (as PostgreSQL's, and CockroachDB's by default since 23.1).
Errors carry PostgreSQL's context (``COPY t, line 3, column n: "x"``). Flush and Sync during
the copy are ignored, any other message is a protocol violation, as in PostgreSQL; after an error
the rest of the client's CopyData is dropped by the session's loop.

TO STDOUT: the table's rows (or the query's) in the same formats, a CopyData message a row.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from changefeed.connection import Result
from changefeed.engine.catalog import TableSchema
from changefeed.engine.txn import Transaction
from changefeed.exceptions import (
    ChangefeedError,
    DuplicateColumn,
    QueryCanceled,
    UndefinedTable,
    UnsupportedFeature,
)
from changefeed.server import gate_wait
from changefeed.server.pg import batch as batches, protocol as p, types as t
from changefeed.server.pg.copy_data import SIGNATURE, binary_row, csv_row, reader_for, text_row
from changefeed.server.pg.copy_spec import CopySpec
from changefeed.server.pg.params import param_types
from changefeed.server.pg.values import Encoder, column_oids, encoders
from changefeed.sql import ast
from changefeed.sql.param_columns import ColumnFacts, ParamColumns
from changefeed.sql.parser import parse

if TYPE_CHECKING:
    from changefeed.server.pg.session import PgSession

__all__ = ["CHUNK_BYTES", "copy_in", "copy_out"]

#: Input gathered before its whole rows are written (the rest of a COPY keeps arriving).
CHUNK_BYTES = 1 << 20


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _resolve(session: PgSession, spec: CopySpec) -> tuple[ast.Insert, list[str], list[int]]:
    """The one-row INSERT of the COPY's columns, their names and their types' OIDs."""
    assert session.conn is not None
    engine, db = session.conn.session, session.conn.db
    db.refresh_catalog()
    (probe,) = parse(f"INSERT INTO {spec.table} VALUES ($1)", "sql")
    assert isinstance(probe, ast.Insert)
    schema: TableSchema | None = db.find_table(engine.table_name(probe.table))
    if schema is None:
        raise UndefinedTable(f'relation "{spec.table}" does not exist')
    if spec.columns:
        cols = list(spec.columns)
        names = [c[1:-1].replace('""', '"') if c.startswith('"') else c.lower() for c in cols]
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if twice is not None:
            raise DuplicateColumn(f'column "{twice}" specified more than once')
    else:
        names = [c.name for c in schema.columns if c.computed is None]
        cols = [_quoted(n) for n in names]
    values = ", ".join(f"${i + 1}" for i in range(len(cols)))
    (stmt,) = parse(f"INSERT INTO {spec.table} ({', '.join(cols)}) VALUES ({values})", "sql")
    assert isinstance(stmt, ast.Insert)
    return stmt, names, param_types(stmt, db.tables(), len(cols))


def _decode(
    col: list[Any], oid: int, binary: bool, spec: CopySpec, name: str, first: int
) -> tuple[list[Any], ColumnFacts | None]:
    """A column of raw values (binary: bytes; text and CSV: str) as the table's values, with
    what holds for all of them; a value that does not decode fails with its line and column."""
    fn = t.text_in(oid)
    try:
        if binary:
            out = t.decode_column(col, oid, True, lambda v, o, _: t.decode_binary(v, o))
        elif fn is None:
            out = col
        else:
            out = list(map(fn, col)) if None not in col else [None if v is None else fn(v) for v in col]
    except t.DECODE_ERRORS:
        for r, v in enumerate(col):  # the value at fault, for its line and column
            where = f"{spec.target}, line {first + r}, column {name}"
            if binary:
                try:
                    t.decode_binary(v, oid)
                except ChangefeedError as exc:
                    exc.context = where
                    raise
            elif v is not None and fn is not None:
                try:
                    fn(v)
                except t.DECODE_ERRORS:
                    err = t.text_error(v, oid)
                    err.context = f'{where}: "{v[:80]}"'
                    raise err from None
        raise
    return out, ColumnFacts.of(out)


async def copy_in(session: PgSession, spec: CopySpec) -> Result:
    assert session.conn is not None
    engine, db = session.conn.session, session.conn.db
    stmt, names, oids = _resolve(session, spec)
    # The INSERT privilege and the statement, before any data: a read of the catalog (in the
    # client's transaction, if any, which may wait for the write lock: never on the loop).
    plan_many = engine.statements.handler(stmt).plan_many
    if plan_many is not None:

        def check(txn: Transaction) -> Result:
            plan_many(engine, txn, stmt)
            return Result()

        await gate_wait.run_inline(db, session.call, functools.partial(engine.run, check, write=False))
    own = not engine.in_transaction  # a transaction of the COPY's own, committed at CopyDone
    if own:
        engine.begin()  # its write lock is taken by the first rows written, not here
    try:
        session.send(p.copy_response(b"G", spec.binary, len(names)))
        await session.flush(force=True)
        reader = reader_for(spec, names)
        written = 0
        while True:
            kind, msg = await session.messages.read()
            if kind == b"d":
                reader.feed(msg.data)
                if len(reader.buf) < CHUNK_BYTES or not reader.ready():
                    continue
                written += await _write(session, spec, stmt, names, oids, reader.take(final=False))
            elif kind == b"c":
                written += await _write(session, spec, stmt, names, oids, reader.take(final=True))
                break
            elif kind == b"f":
                raise QueryCanceled(f"COPY from stdin failed: {msg.cstr()}")
            elif kind in (b"H", b"S"):
                continue  # ignored during COPY, as PostgreSQL does
            else:
                raise p.ProtocolViolation(f"unexpected message type 0x{kind[0]:02X} during COPY from stdin")
        if own:
            await gate_wait.run_inline(db, session.call, engine.commit)
    except BaseException:
        if own and engine.in_transaction:
            engine.rollback()
        raise
    return Result(status=f"COPY {written}", rowcount=written)


async def _write(
    session: PgSession,
    spec: CopySpec,
    stmt: ast.Insert,
    names: Sequence[str],
    oids: Sequence[int],
    taken: tuple[list[list[Any]], int, int],
) -> int:
    raw, n, first = taken
    if not n:
        return 0
    columns: list[list[Any]] = []
    facts: list[ColumnFacts | None] = []
    for col, oid, name in zip(raw, oids, names, strict=True):
        values, fact = _decode(col, oid, spec.binary, spec, name, first)
        columns.append(values)
        facts.append(fact)
    fut = batches.write_rows(session, stmt, ParamColumns(columns, facts, n))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        # The session is being stopped: the rows may be in a pool thread on the engine's
        # connection; they end before the caller rolls back on it.
        with contextlib.suppress(BaseException):
            await fut
        raise
    except ChangefeedError as exc:
        if exc.context is None:
            exc.context = f"{spec.target}, line {first + exc.row}" if exc.row is not None else spec.target
        exc.row = None
        raise


async def copy_out(session: PgSession, spec: CopySpec) -> Result:
    assert session.conn is not None
    engine = session.conn.session
    sql = spec.query or f"SELECT {', '.join(spec.columns) or '*'} FROM {spec.table}"
    stmts = parse(sql, "sql")
    if len(stmts) != 1 or not isinstance(stmts[0], ast.Select):
        raise UnsupportedFeature("COPY (query) TO STDOUT takes one SELECT")
    res = await session.call(engine.execute, stmts[0], [])
    oids = column_oids(res.types, res.rows, len(res.columns))
    encs, fmts = encoders(oids, [1 if spec.binary else 0])
    if spec.binary and 0 in fmts:
        bad = next(t.TYPE_NAMES.get(o, str(o)) for o, f in zip(oids, fmts, strict=True) if f == 0)
        raise UnsupportedFeature(f"COPY TO in binary format does not write type {bad}")
    session.send(p.copy_response(b"H", spec.binary, len(res.columns)))
    for data in _copy_data(spec, res, encs):  # a row at a time, sent a buffer's worth at a time
        session.send(p.message(b"d", data))  # CopyData
        await session.flush()
    session.send(p.COPY_DONE)
    return Result(status=f"COPY {len(res.rows)}", rowcount=len(res.rows))


def _copy_data(spec: CopySpec, res: Result, encs: Sequence[Encoder]) -> Iterator[bytes]:
    """The CopyData bodies of ``res``'s rows in ``spec``'s format."""
    if spec.binary:
        head = SIGNATURE + struct.pack("!ii", 0, 0)  # with the first row, as PostgreSQL sends it
        for row in res.rows:
            yield head + binary_row([None if v is None else e(v) for e, v in zip(encs, row, strict=True)])
            head = b""
        yield head + struct.pack("!h", -1)
        return
    line = text_row if spec.format == "text" else csv_row
    if spec.header:
        yield line(list(res.columns), spec)
    for row in res.rows:
        yield line([None if v is None else e(v).decode() for e, v in zip(encs, row, strict=True)], spec)
