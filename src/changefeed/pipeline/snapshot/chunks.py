"""One key-range chunk of a table as it was at a feed's snapshot point S.

A table is cut into chunks by key (:func:`compute_bounds`: inclusive upper bounds in storage
order, computed once per scan and saved by ``scan.load_or_plan``). :func:`read_chunk_batches`
reads chunk ``i`` in one short read transaction: for a key of the chunk, its value at S is the
old image of its first change with ``seq > S`` if it has one (absent when ``ox = 0``), else its
current row; keys deleted since S come back through their first change's old image. The rows
come out as Arrow batches with the change-stream schema, ``op = CHANGE_SNAPSHOT``, the feed's
creation timestamp, every ``u<id>`` true and no old image.

Read by the initial scan and the schema-change backfill (Spark tasks, ``scan``) and by core
changefeeds (``core``, no Spark). In Spark's Python workers a chunk is read through the ADBC
SQLite driver straight into Arrow (``arrow_sqlite``; about four times faster than ``sqlite3``'s
tuples), falling back to ``sqlite3`` where it cannot.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import (
    CHANGE_SNAPSHOT,
    META_FIELDS,
    change_schema,
    rows_to_batch,
    storage_arrow_to_arrow,
    storage_class,
    storage_to_arrow,
)
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.engine.storage import TableStore, token
from changefeed.feeds.spec import FeedSpec
from changefeed.pipeline.sources import arrow_sqlite

CHUNK_ROWS = int(os.environ.get("CHANGEFEED_SCAN_CHUNK_ROWS", "100000"))
#: Rows per Arrow batch a scan task yields (and per fetchmany), bounding a task's memory.
FETCH_ROWS = 50_000


def _order_cols(st: TableStore) -> list[str]:
    return (["_tok"] if st.cql else []) + [c.db for c in st.key_cols]


def _row_value(cols: list[str]) -> str:
    return "(" + ", ".join(cols) + ")"


def compute_bounds(conn: Any, table: TableSchema, chunk_rows: int) -> tuple[list[list[Any]], int]:
    """Upper bounds (inclusive, in storage order) of every chunk but the last, and the row count."""
    st = TableStore(table)
    cols = _order_cols(st)
    rv = _row_value(cols)
    order = ", ".join(cols)
    bounds: list[list[Any]] = []
    prev: list[Any] | None = None
    while True:
        if prev is None:
            row = conn.execute(
                f"SELECT {order} FROM {st.t} ORDER BY {order} LIMIT 1 OFFSET ?", (chunk_rows - 1,)
            ).fetchone()
        else:
            ph = ", ".join("?" for _ in cols)
            row = conn.execute(
                f"SELECT {order} FROM {st.t} WHERE {rv} > ({ph}) ORDER BY {order} LIMIT 1 OFFSET ?",
                (*prev, chunk_rows - 1),
            ).fetchone()
        if row is None:
            break
        prev = list(row)
        bounds.append(prev)
    total = int(conn.execute(f"SELECT count(*) FROM {st.t}").fetchone()[0])
    return bounds, total


def _snapshot_batch(
    st: TableStore, feed: FeedSpec, target: pa.Schema, columns: Sequence[Sequence[Any] | pa.Array], n: int
) -> pa.RecordBatch:
    """A batch of snapshot rows from storage values, one sequence per ``st.all_cols`` column
    (or an Arrow array already of the column's type, from :func:`_read_chunk_arrow`)."""
    meta = (
        feed.created_seq,
        feed.created_wall,
        feed.created_logical,
        feed.created_tx,
        CHANGE_SNAPSHOT,
        False,
        False,
    )
    # numpy buffers, not Python scalars: pyarrow's scalar conversion imports pandas (~0.5-1 s,
    # once per process: most of a small run's start-up)
    arrays: list[pa.Array] = [_const(v, f.type, n) for v, f in zip(meta, META_FIELDS, strict=True)]
    base = len(META_FIELDS)
    for j, c in enumerate(st.all_cols):
        col = columns[j]
        arrays.append(col if isinstance(col, pa.Array) else storage_to_arrow(c, col))
    true = _const(True, pa.bool_(), n)
    arrays.extend(true for _ in st.value_cols)
    base += len(st.all_cols) + len(st.value_cols)
    arrays.extend(pa.nulls(n, target.field(base + j).type) for j in range(len(st.value_cols)))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _const(v: int | bool, typ: pa.DataType, n: int) -> pa.Array:
    """``n`` copies of ``v`` straight from a numpy buffer (``pa.array`` and ``pa.scalar`` on
    Python values import pandas, ~0.5-1 s once per process: most of a small run's start-up)."""
    if typ == pa.bool_():
        bits = np.packbits(np.full(n, bool(v)), bitorder="little")
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(bits)])
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.full(n, v, dtype=typ.to_pandas_dtype()))])


def _live_sql(st: TableStore) -> str:
    """Rows that ``_decode_row`` returns unchanged: no TTL anywhere, and (CQL) not a row without a
    marker whose regular cells are all null (such rows do not exist)."""
    if not st.cql:
        return "_exp IS NULL AND (_m IS NULL OR _m = 0)"
    some = " OR ".join(f"{c.db} IS NOT NULL" for c in st.regular_cols) or "0"
    return f"_exp IS NULL AND (_m = 0 OR (_m IS NULL AND ({some})))"


def _chunk_range(
    st: TableStore, bounds: list[list[Any]], i: int
) -> tuple[list[str], list[Any], tuple[Any, ...] | None, tuple[Any, ...] | None]:
    """Chunk ``i``'s key range: SQL conditions on the storage order, their parameters, and its
    (exclusive) lower and (inclusive) upper bound, None at the ends."""
    cols = _order_cols(st)
    rv = _row_value(cols)
    ph = ", ".join("?" for _ in cols)
    conds: list[str] = []
    params: list[Any] = []
    if i > 0:
        conds.append(f"{rv} > ({ph})")
        params.extend(bounds[i - 1])
    if i < len(bounds):
        conds.append(f"{rv} <= ({ph})")
        params.extend(bounds[i])
    return (
        conds,
        params,
        tuple(bounds[i - 1]) if i > 0 else None,
        tuple(bounds[i]) if i < len(bounds) else None,
    )


def _first_changes(
    st: TableStore, rows: Iterable[Sequence[Any]], lo: tuple[Any, ...] | None, hi: tuple[Any, ...] | None
) -> dict[tuple[Any, ...], tuple[Any, ...] | None]:
    """The first change after S of every key of a chunk, from rows ``(ox, key.., o<id>..)`` in
    ``seq`` order: the row when the key existed at S (``ox``), None when it did not."""
    nkey = len(st.key_cols)
    first: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
    for r in rows:
        key = tuple(r[1 : 1 + nkey])
        if key in first:
            continue
        if st.cql:  # the change stream is not range-filtered by token: filter here
            ok = (token(key[: len(st.pk_cols)]), *key)
            if (lo is not None and ok <= lo) or (hi is not None and ok > hi):
                continue
        first[key] = tuple(r) if r[0] else None
    return first


def _old_images(
    st: TableStore, first: dict[tuple[Any, ...], tuple[Any, ...] | None]
) -> list[tuple[Any, ...]]:
    """The values at S (``st.all_cols`` order) of the keys changed since S that existed then."""
    nkey = len(st.key_cols)
    images: list[tuple[Any, ...]] = []
    for key, x in first.items():
        if x is None:
            continue
        image = dict(zip((c.id for c in st.key_cols), key, strict=True))
        for j, c in enumerate(st.value_cols):
            image[c.id] = x[1 + nkey + j]
        images.append(tuple(image.get(c.id) for c in st.all_cols))
    return images


def read_chunk_batches(
    db: str,
    table: TableSchema,
    feed: FeedSpec,
    bounds: list[list[Any]],
    i: int,
    fetch_rows: int = FETCH_ROWS,
    *,
    arrow: bool = False,
) -> Iterator[pa.RecordBatch]:
    """The snapshot rows of chunk ``i`` (keys in ``(bounds[i-1], bounds[i]]``), as Arrow batches of
    at most ``fetch_rows`` rows, all read in one short read transaction.

    Current rows without TTLs are read as tuples straight into Arrow columns; rows with TTLs (rare)
    go through ``TableStore._decode_row``. Keys changed after S are dropped from the current rows
    and come back as the old image of their first later change.

    ``arrow``: read through the ADBC SQLite driver when it can (:func:`_read_chunk_arrow`); only
    for Spark's Python workers (see ``arrow_sqlite``: no other connection to the file in the
    process)."""
    if arrow:
        fast = _read_chunk_arrow(db, table, feed, bounds, i, fetch_rows)
        if fast is not None:
            yield from fast
            return
    st = TableStore(table)
    target = change_schema(table)
    conds, params, lo, hi = _chunk_range(st, bounds, i)
    nkey = len(st.key_cols)
    value_cols = st.value_cols
    row_ids = {c.id for c in st.row_cols}
    # storage values of every st.all_cols column (statics are not part of a current row)
    select = ", ".join(c.db if c.id in row_ids else "NULL" for c in st.all_cols)
    keypos = [j for j, c in enumerate(st.all_cols) if c.is_key]
    range_sql = " AND ".join(conds)
    live = _live_sql(st)
    conn = open_sqlite(Path(db) / DB_FILE, readonly=True)
    try:
        conn.execute("BEGIN")
        # the first change after S of every key of the chunk: its old image is the key's value at S
        xsel = ", ".join(["ox"] + [c.db for c in st.key_cols] + [f"o{c.id}" for c in value_cols])
        xconds, xparams = ["seq > ?", "st = 0"], [feed.created_seq]
        if not st.cql:
            xconds += conds
            xparams += params
        first = _first_changes(
            st,
            conn.execute(f"SELECT {xsel} FROM {st.x} WHERE {' AND '.join(xconds)} ORDER BY seq", xparams),
            lo,
            hi,
        )
        single = {k[0] for k in first} if nkey == 1 else None

        def current(columns: list[Sequence[Any]], n: int) -> pa.RecordBatch:
            batch = _snapshot_batch(st, feed, target, columns, n)
            if not first:
                return batch
            if single is not None:
                keep = [v not in single for v in columns[keypos[0]]]
            else:
                keep = [k not in first for k in zip(*(columns[p] for p in keypos), strict=True)]
            return batch.filter(pa.array(keep, type=pa.bool_()))

        # current rows without TTLs: tuples -> columns -> Arrow
        where = " AND ".join(x for x in (range_sql, live) if x)
        cur = conn.execute(f"SELECT {select} FROM {st.t} WHERE {where}", params)
        while rows := cur.fetchmany(fetch_rows):
            out = current(list(zip(*rows, strict=True)), len(rows))
            del rows
            if out.num_rows:
                yield out
        # current rows with TTLs (or CQL rows without a marker): decoded one by one
        where = " AND ".join(x for x in (range_sql, f"NOT ({live})") if x)
        slow: list[tuple[Any, ...]] = []
        for r in conn.execute(f"SELECT {st._row_select} FROM {st.t} WHERE {where}", params):
            row = st._decode_row(r, feed.created_wall)
            if row is not None:
                slow.append(tuple(row.get(c.id) for c in st.all_cols))
            if len(slow) >= fetch_rows:
                out = current(list(zip(*slow, strict=True)), len(slow))
                slow = []
                if out.num_rows:
                    yield out
        if slow:
            out = current(list(zip(*slow, strict=True)), len(slow))
            if out.num_rows:
                yield out
        conn.execute("COMMIT")
    finally:
        conn.close()
    # keys changed since S that existed at S: their old images
    images = _old_images(st, first)
    for a in range(0, len(images), fetch_rows):
        part = images[a : a + fetch_rows]
        yield _snapshot_batch(st, feed, target, list(zip(*part, strict=True)), len(part))


def _read_chunk_arrow(
    db: str, table: TableSchema, feed: FeedSpec, bounds: list[list[Any]], i: int, fetch_rows: int
) -> Iterator[pa.RecordBatch] | None:
    """:func:`read_chunk_batches` through the ADBC SQLite driver, in one read transaction of its
    own, or None when it cannot, decided before anything is yielded: no driver, a column
    without a fixed storage class, a value outside its class, or rows that need
    ``TableStore._decode_row`` (TTLs, CQL rows without a marker). The chunk's current rows are
    read whole (a chunk is ``CHUNK_ROWS`` rows) and yielded in batches of ``fetch_rows``."""
    st = TableStore(table)
    conds, params, lo, hi = _chunk_range(st, bounds, i)
    value_cols = st.value_cols
    row_ids = {c.id for c in st.row_cols}
    live = _live_sql(st)
    select = ", ".join(c.db if c.id in row_ids else "NULL" for c in st.all_cols)
    current_sql = arrow_sqlite.pinned(
        [storage_class(c.type) for c in st.all_cols],
        f"SELECT {select} FROM {st.t} WHERE {' AND '.join([*conds, live])}",
    )
    xsel = ", ".join(["ox"] + [c.db for c in st.key_cols] + [f"o{c.id}" for c in value_cols])
    xconds, xparams = ["seq > ?", "st = 0"], [feed.created_seq]
    if not st.cql:
        xconds += conds
        xparams += params
    first_sql = arrow_sqlite.pinned(
        [pa.int64()]
        + [storage_class(c.type) for c in st.key_cols]
        + [storage_class(c.type) for c in value_cols],
        f"SELECT {xsel} FROM {st.x} WHERE {' AND '.join(xconds)} ORDER BY seq",
    )
    slow_sql = f"SELECT count(*) FROM {st.t} WHERE {' AND '.join([*conds, f'NOT ({live})'])}"
    if current_sql is None or first_sql is None:
        return None
    conn = arrow_sqlite.connect(Path(db) / DB_FILE)
    if conn is None:
        return None
    try:
        arrow_sqlite.execute(conn, "BEGIN")
        slow = arrow_sqlite.read_table(conn, str(arrow_sqlite.pinned([pa.int64()], slow_sql)), params, 2)
        if slow.num_rows != 1 or arrow_sqlite.column(slow, 0)[0].as_py() != 0:
            return None
        xs = arrow_sqlite.read_table(conn, first_sql, xparams, 65_536)
        current = arrow_sqlite.read_table(conn, current_sql, params, CHUNK_ROWS)
        arrow_sqlite.execute(conn, "COMMIT")
    except Exception:  # a value outside its column's storage class: read through sqlite3
        return None
    finally:
        conn.close()
    rows = zip(*(arrow_sqlite.column(xs, j).to_pylist() for j in range(xs.num_columns)), strict=True)
    first = _first_changes(st, rows, lo, hi)
    return _arrow_chunk_batches(st, change_schema(table), feed, current, first, fetch_rows)


def _arrow_chunk_batches(
    st: TableStore,
    target: pa.Schema,
    feed: FeedSpec,
    current: pa.Table,
    first: dict[tuple[Any, ...], tuple[Any, ...] | None],
    fetch_rows: int,
) -> Iterator[pa.RecordBatch]:
    """The snapshot batches of a chunk read by :func:`_read_chunk_arrow`: its current rows
    (``current``, storage classes, ``st.all_cols`` order) but the keys changed since S, then those
    keys' old images."""
    keypos = [j for j, c in enumerate(st.all_cols) if c.is_key]
    if first and current.num_rows:
        if len(keypos) == 1:
            keys = arrow_sqlite.column(current, keypos[0])
            changed = [k[0] for k in first]
            try:
                hit = pc.is_in(keys, value_set=pa.array(changed).cast(keys.type))
                keep = pc.invert(pc.fill_null(hit, False))
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                gone = set(changed)
                keep = pa.array([v not in gone for v in keys.to_pylist()], type=pa.bool_())
        else:
            cols = [arrow_sqlite.column(current, p).to_pylist() for p in keypos]
            keep = pa.array([k not in first for k in zip(*cols, strict=True)], type=pa.bool_())
        current = current.filter(keep)
    arrays = [storage_arrow_to_arrow(c, arrow_sqlite.column(current, j)) for j, c in enumerate(st.all_cols)]
    n = current.num_rows
    del current
    for a in range(0, n, fetch_rows):
        m = min(fetch_rows, n - a)
        yield _snapshot_batch(st, feed, target, [x.slice(a, m) for x in arrays], m)
    images = _old_images(st, first)
    for a in range(0, len(images), fetch_rows):
        part = images[a : a + fetch_rows]
        yield _snapshot_batch(st, feed, target, list(zip(*part, strict=True)), len(part))


def read_chunk(
    db: str, table: TableSchema, feed: FeedSpec, bounds: list[list[Any]], i: int
) -> pa.RecordBatch:
    """The snapshot rows of chunk ``i`` as one record batch."""
    batches = list(read_chunk_batches(db, table, feed, bounds, i))
    if not batches:
        return rows_to_batch(table, [])
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
