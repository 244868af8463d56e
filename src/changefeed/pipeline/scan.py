"""INITIAL_SCAN: export the rows that existed when a feed was created, while writes go on.

The snapshot S is the feed's creation point (``created_seq`` in the change stream, timestamp
``created_wall/created_logical/created_tx``). No read transaction is held across the scan: the
base table ``t<id>`` is cut into key-range chunks (boundaries computed once and saved in
``DB/checkpoints/feed-<id>.scan`` so a restart re-reads the very same chunks), and each chunk is
read by one Spark task in its own short read transaction. For a key of the chunk, its value at S
is the old image of its first change with ``seq > S`` if it has one (absent when ``ox = 0``), else
its current row; keys deleted since S come back through their first change's old image.

Snapshot rows have the change-stream schema with ``op = CHANGE_SNAPSHOT``, the creation
timestamp, every ``u<id>`` true and no old image; they go through the feed's encoder to its topic
before the feed's streaming query starts, so every key's snapshot record precedes its updates.

Throughput: a group is many chunks (``GROUP_ROWS`` rows, a multiple of the core count, fixed in
the plan file) so the cost of a Spark job is paid a few times per scan, not per chunk. Into the
embedded topics each chunk's task reads, encodes and appends its own records
(:func:`chunk_appender`: one append per topic partition under writer ``feed-<id>-scanc<chunk>``,
batch id = the chunk's group), so the appends run on every core and no record passes through
the driver; group g's progress is recorded after its Spark job, and a restarted group's chunks
skip the partitions they already wrote. Into a sink (webhook, cloud storage) a group's encoded
records are collected on the driver as Arrow and appended from there under writer
``feed-<id>-scan`` (one append per topic partition, in group order) while a background thread
already runs the next group's Spark job; at most two groups are in flight.

In Spark's Python workers a chunk is read through the ADBC SQLite driver straight into Arrow
(``arrow_sqlite``; about four times faster than ``sqlite3``'s tuples), falling back to
``sqlite3`` where it cannot: rows without TTLs are then fetched as tuples and transposed into
Arrow columns (no per-row dict). Only the stored ``c<id>`` columns cross from Python to the JVM;
the columns equal on every snapshot row are Spark literals (which also lets Spark fold the
encoder's branches on ``op``/``ox``). A task's memory stays bounded by its chunk.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from changefeed.pipeline import arrow_sqlite
from changefeed.pipeline.families import family_frame
from changefeed.pipeline.sinks import SinkWriter, open_delivery
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from changefeed.formats.base import Encoder

CHUNK_ROWS = int(os.environ.get("CHANGEFEED_SCAN_CHUNK_ROWS", "100000"))
#: Rows per Arrow batch a scan task yields (and per fetchmany), bounding a task's memory.
FETCH_ROWS = 50_000
#: Rows per group (one Spark job, one batch id of the scan's writer).
GROUP_ROWS = int(os.environ.get("CHANGEFEED_SCAN_GROUP_ROWS", "800000"))


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


def plan_path(db: Path, feed_id: int, name: str = "scan") -> Path:
    """Where a scan plan of feed ``feed_id`` is saved: ``scan`` for the initial scan."""
    return db / "checkpoints" / f"feed-{feed_id}.{name}"


def load_or_plan(
    db: Path, feed: FeedSpec, table: TableSchema, chunk_rows: int, group_chunks: int = 0, name: str = "scan"
) -> dict[str, Any]:
    """The scan plan ``name`` of ``feed``: the saved one if any (same creation point), else a new
    one with chunks of ``chunk_rows`` rows and ``group_chunks`` chunks per group (0: one per
    Spark core), saved before it is used so that a restart re-reads the very same chunks."""
    path = plan_path(db, feed.id, name)
    if path.exists():
        with path.open("rb") as fh:
            plan: dict[str, Any] = pickle.load(fh)
        if plan.get("created_seq") == feed.created_seq:
            return plan
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        bounds, total = compute_bounds(conn, table, chunk_rows)
    finally:
        conn.close()
    plan = {
        "created_seq": feed.created_seq,
        "bounds": bounds,
        "total": total,
        "chunk_rows": chunk_rows,
        "group_chunks": group_chunks,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as fh:
        pickle.dump(plan, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return plan


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
    arrays: list[pa.Array] = [
        pa.repeat(pa.scalar(v, f.type), n) for v, f in zip(meta, META_FIELDS, strict=True)
    ]
    base = len(META_FIELDS)
    for j, c in enumerate(st.all_cols):
        col = columns[j]
        arrays.append(col if isinstance(col, pa.Array) else storage_to_arrow(c, col))
    true = pa.repeat(pa.scalar(True, pa.bool_()), n)
    arrays.extend(true for _ in st.value_cols)
    base += len(st.all_cols) + len(st.value_cols)
    arrays.extend(pa.nulls(n, target.field(base + j).type) for j in range(len(st.value_cols)))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


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


def _chunk_reader(
    db: str, table: TableSchema, feed: FeedSpec, bounds: list[list[Any]]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function: chunk numbers in, the chunks' stored columns (``c<id>``) out."""
    names = [c.db for c in table.stored]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column("id").to_pylist():
                for out in read_chunk_batches(db, table, feed, bounds, int(i), arrow=True):
                    yield out.select(names)

    return fn


def snapshot_frame(
    spark: SparkSession,
    db: str,
    table: TableSchema,
    feed: FeedSpec,
    bounds: list[list[Any]],
    lo: int,
    hi: int,
) -> DataFrame:
    """The snapshot rows of chunks ``lo .. hi-1`` (one Spark task per chunk) with the change-stream
    schema. Only the stored columns cross from Python to the JVM; the columns that are the same on
    every snapshot row are literals, which also lets Spark fold the encoder's branches on them."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    full = from_arrow_schema(change_schema(table))
    stored = {c.db for c in table.stored}
    narrow = from_arrow_schema(pa.schema([f for f in change_schema(table) if f.name in stored]))
    df = spark.range(lo, hi, numPartitions=hi - lo).mapInArrow(_chunk_reader(db, table, feed, bounds), narrow)
    consts: dict[str, Any] = {
        "seq": feed.created_seq,
        "ts": feed.created_wall,
        "lg": feed.created_logical,
        "tx": feed.created_tx,
        "op": CHANGE_SNAPSHOT,
        "ox": False,
        "st": False,
    }
    consts.update({f"u{c.id}": True for c in table.stored if not c.is_key})
    cols = []
    for f in full.fields:
        if f.name in stored:
            cols.append(F.col(f.name))
        else:
            cols.append(F.lit(consts.get(f.name)).cast(f.dataType).alias(f.name))
    return df.select(*cols)


def _group_chunks(spark: SparkSession, chunk_rows: int, group_rows: int | None = None) -> int:
    """Chunks per Spark job: a job costs ~1 s of overhead, so take many chunks at once (a multiple
    of the core count), up to ``group_rows`` rows (the driver holds up to two groups'
    encoded records in memory)."""
    par = max(2, int(spark.sparkContext.defaultParallelism))
    rows = GROUP_ROWS if group_rows is None else group_rows
    return max(par, (rows // max(1, chunk_rows)) // par * par)


def _collect_encoded(encoded: DataFrame) -> pa.Table:
    """A group's encoded records collected on the driver as Arrow, stably sorted by topic
    partition (row order within a partition is the Spark partitions' order, as on the executors)."""
    t = encoded.select("partition", "key", "value", "ts").toArrow()
    return t.take(pc.sort_indices(t, sort_keys=[("partition", "ascending")]))


def chunk_appender(
    store: TopicStore, topic: str, writer: str, batch_id: int, first_chunk: int = 0
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function over one scan chunk's encoded records (the task's partition index
    counts the chunks from ``first_chunk``): one append per topic partition under
    ``<writer>c<chunk>``, each partition's records in the chunk's row order. A chunk's appends
    are idempotent on their own: a restarted scan skips the partitions a chunk already wrote."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        chunk = first_chunk + (0 if ctx is None else ctx.partitionId())
        got = [b for b in batches if b.num_rows]
        records: list[pa.RecordBatch] = []
        if got:
            t = pa.Table.from_batches(got)
            del got
            # topic partitions in a rotated order, from the chunk's number on: concurrent tasks
            # start on different partitions instead of queueing for one partition's write lock
            parts = store.topic(topic).partitions
            turn = pc.add(t.column("partition"), pa.scalar(parts - chunk % parts, pa.int32()))
            order = pc.sort_indices(pc.if_else(pc.less(turn, parts), turn, pc.subtract(turn, parts)))
            records = t.take(order).to_batches()
        from changefeed.pipeline import job

        yield from job._make_writer(store, topic, f"{writer}c{chunk}", batch_id, None)(iter(records))

    return fn


def append_chunks(
    encoded: DataFrame, store: TopicStore, topic: str, writer: str, batch_id: int, first_chunk: int = 0
) -> None:
    """Run the Spark job whose tasks append their own chunk's encoded records (one Spark
    partition per chunk, numbered from ``first_chunk``): :func:`chunk_appender`."""
    fn = chunk_appender(store, topic, writer, batch_id, first_chunk)
    encoded.select("partition", "key", "value", "ts").mapInArrow(fn, "partition int, n long").collect()


def _append_group(
    store: TopicStore | SinkWriter, topic: str, writer: str, batch_id: int, records: pa.Table
) -> None:
    """One append per topic partition of a group's records (sorted by partition), from the driver."""
    from changefeed.pipeline import job

    for _ in job._make_writer(store, topic, writer, batch_id, None)(iter(records.to_batches())):
        pass


def run_initial_scan(
    spark: SparkSession,
    db: str | Path,
    feed: FeedSpec,
    *,
    on_progress: Callable[[FeedSpec, int, int], None] | None = None,
    encoder: Encoder | None = None,
    chunk_rows: int = CHUNK_ROWS,
) -> None:
    """Run (or resume) the initial scan of ``feed``, then switch it to 'running'."""

    # Spark's modules load here, not at import: core changefeeds read snapshots through
    # read_chunk_batches with no Spark in the process.
    from changefeed.formats.base import get_encoder
    from changefeed.pipeline import job

    dbp = Path(db).absolute()
    table = _schema_at_creation(dbp, feed)
    enc = encoder or get_encoder(feed.format)
    plan = load_or_plan(dbp, feed, table, chunk_rows, _group_chunks(spark, chunk_rows))
    bounds, total = plan["bounds"], plan["total"]
    nchunks = len(bounds) + 1
    par = max(2, int(spark.sparkContext.defaultParallelism))
    # Chunks per Spark job (= per group, one batch id): fixed in the plan, so a resumed scan cuts
    # the very same groups. Plans written before the key existed used one chunk per core.
    per = int(plan.get("group_chunks") or par)
    ngroups = -(-nchunks // per)
    done = _groups_done(dbp, feed.id)
    store = open_delivery(dbp, feed, table)  # the topics, or a job's webhook / cloud-storage sink
    writer = f"{job.writer_id(feed)}-scan"

    def collect(g: int) -> pa.Table:
        lo, hi = g * per, min(nchunks, (g + 1) * per)
        df = snapshot_frame(spark, str(dbp), table, feed, bounds, lo, hi)
        return _collect_encoded(enc.encode_spark(family_frame(df, table, feed), table, feed))

    def progressed(g: int) -> None:
        scanned = min(total, min(nchunks, (g + 1) * per) * plan["chunk_rows"])
        job.write_progress(
            dbp,
            feed.id,
            feed.created_seq,
            feed.created_wall,
            feed.created_logical,
            {"scanned": scanned, "total": total, "groups_done": g + 1},
        )
        if on_progress is not None:
            on_progress(feed, scanned, total)

    if isinstance(store, TopicStore):
        # Into the embedded topics every chunk task appends its own records (``chunk_appender``):
        # no records through the driver, appends on every core. Group g's progress is recorded
        # after its Spark job, so a restart re-runs it, and its chunks skip what they appended.
        for g in range(done, ngroups):
            lo, hi = g * per, min(nchunks, (g + 1) * per)
            if any(
                (store.committed_batch(feed.topic, p, writer) or -1) >= g for p in range(feed.partitions)
            ):  # a group begun by a version that appended whole groups from the driver
                _append_group(store, feed.topic, writer, g, collect(g))
            else:
                df = snapshot_frame(spark, str(dbp), table, feed, bounds, lo, hi)
                encoded = enc.encode_spark(family_frame(df, table, feed), table, feed)
                append_chunks(encoded, store, feed.topic, writer, g, first_chunk=lo)
            progressed(g)
    else:
        _scan_to_sink(collect, store, feed.topic, writer, done, ngroups, progressed)
    conn = job.engine_conn(dbp)
    try:
        conn.execute("UPDATE _feeds SET state = 'running' WHERE id = ? AND state = 'scanning'", (feed.id,))
    finally:
        conn.close()
    job.write_progress(
        dbp,
        feed.id,
        max(feed.created_seq, job.delivered_seq(dbp, feed.id) or 0),
        feed.created_wall,
        feed.created_logical,
        {"scanned": total, "total": total, "groups_done": ngroups},
    )
    if on_progress is not None:
        on_progress(feed, total, total)


def _scan_to_sink(
    collect: Callable[[int], pa.Table],
    store: TopicStore | SinkWriter,
    topic: str,
    writer: str,
    done: int,
    ngroups: int,
    progressed: Callable[[int], None],
) -> None:
    """Groups ``done .. ngroups-1`` collected on the driver and appended from there, in order."""
    # Two groups in flight at most: while the driver appends group g (one core), a background
    # thread runs group g+1's Spark job (read + encode, collected as Arrow) on the other cores.
    # Appends stay in group (= batch id) order, and group g's progress is recorded only after its
    # appends, so a restart resumes exactly at the first group not fully appended.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"scan-{writer}") as pool:
        pending: Future[pa.Table] | None = pool.submit(collect, done) if done < ngroups else None
        try:
            for g in range(done, ngroups):
                assert pending is not None
                records = pending.result()
                pending = pool.submit(collect, g + 1) if g + 1 < ngroups else None
                _append_group(store, topic, writer, g, records)
                del records
                progressed(g)
        finally:
            if pending is not None and not pending.cancel():
                # a failure while appending: let the Spark job in flight finish (or fail) before
                # returning; its records are dropped (the group is re-read on restart)
                with contextlib.suppress(Exception):
                    pending.result()


def _schema_at_creation(db: Path, feed: FeedSpec) -> TableSchema:
    """The table's schema at the feed's creation (a column added since is not in the scan)."""
    from changefeed.engine.clock import CommitTs
    from changefeed.engine.schema_history import schema_as_of
    from changefeed.pipeline.journal_source import load_table

    current = load_table(db, feed.table_id)
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        return schema_as_of(
            conn, current, feed.created_seq, CommitTs(feed.created_wall, feed.created_logical)
        )
    finally:
        conn.close()


def _groups_done(db: Path, feed_id: int) -> int:
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        row = conn.execute("SELECT detail FROM _progress WHERE feed_id = ?", (feed_id,)).fetchone()
    finally:
        conn.close()
    if row is None or not row[0]:
        return 0
    try:
        return int(json.loads(row[0]).get("groups_done", 0))
    except (ValueError, AttributeError):
        return 0
