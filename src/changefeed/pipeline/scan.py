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
with writer ``feed-<id>-scan`` and batch id = chunk group number, before the feed's streaming
query starts, so every key's snapshot record precedes its updates.
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT, change_schema, rows_to_batch
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.engine.storage import TableStore, token
from changefeed.feeds.spec import FeedSpec
from changefeed.pipeline import job
from changefeed.pipeline.journal_source import load_table
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from changefeed.formats.base import Encoder

CHUNK_ROWS = int(os.environ.get("CHANGEFEED_SCAN_CHUNK_ROWS", "50000"))


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
            row = conn.execute(f"SELECT {order} FROM {st.t} ORDER BY {order} LIMIT 1 OFFSET ?", (chunk_rows - 1,)).fetchone()
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


def _plan_path(db: Path, feed_id: int) -> Path:
    return db / "checkpoints" / f"feed-{feed_id}.scan"


def load_or_plan(db: Path, feed: FeedSpec, table: TableSchema, chunk_rows: int) -> dict[str, Any]:
    path = _plan_path(db, feed.id)
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
    plan = {"created_seq": feed.created_seq, "bounds": bounds, "total": total, "chunk_rows": chunk_rows}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as fh:
        pickle.dump(plan, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return plan


def read_chunk(db: str, table: TableSchema, feed: FeedSpec, bounds: list[list[Any]], i: int) -> pa.RecordBatch:
    """The snapshot rows of chunk ``i`` (keys in ``(bounds[i-1], bounds[i]]``)."""
    st = TableStore(table)
    cols = _order_cols(st)
    rv = _row_value(cols)
    ph = ", ".join("?" for _ in cols)
    conds, params = [], []
    if i > 0:
        conds.append(f"{rv} > ({ph})")
        params.extend(bounds[i - 1])
    if i < len(bounds):
        conds.append(f"{rv} <= ({ph})")
        params.extend(bounds[i])
    lo = tuple(bounds[i - 1]) if i > 0 else None
    hi = tuple(bounds[i]) if i < len(bounds) else None
    nkey = len(st.key_cols)
    value_cols = st.value_cols
    conn = open_sqlite(Path(db) / DB_FILE, readonly=True)
    try:
        conn.execute("BEGIN")
        current = {
            tuple(r[c.id] for c in st.key_cols): r
            for r in st.scan_rows(conn, feed.created_wall, None, " AND ".join(conds), params)
        }
        xsel = ", ".join(["ox"] + [c.db for c in st.key_cols] + [f"o{c.id}" for c in value_cols])
        xconds, xparams = ["seq > ?", "st = 0"], [feed.created_seq]
        if not st.cql:
            xconds += conds
            xparams += params
        first: dict[tuple[Any, ...], tuple[Any, ...] | None] = {}
        for r in conn.execute(f"SELECT {xsel} FROM {st.x} WHERE {' AND '.join(xconds)} ORDER BY seq", xparams):
            key = tuple(r[1 : 1 + nkey])
            if key in first:
                continue
            if st.cql:
                ok = (token(key[: len(st.pk_cols)]),) + key
                if (lo is not None and ok <= lo) or (hi is not None and ok > hi):
                    continue
            first[key] = r if r[0] else None
        conn.execute("COMMIT")
    finally:
        conn.close()
    rows = []
    head = (feed.created_seq, feed.created_wall, feed.created_logical, feed.created_tx, CHANGE_SNAPSHOT, 0, 0)
    tail_u = (1,) * len(value_cols)
    tail_o = (None,) * len(value_cols)
    for key, row in current.items():
        if key in first:
            continue
        rows.append(head + tuple(row.get(c.id) for c in st.all_cols) + tail_u + tail_o)
    for key, x in first.items():
        if x is None:
            continue
        image = dict(zip((c.id for c in st.key_cols), key, strict=True))
        for j, c in enumerate(value_cols):
            image[c.id] = x[1 + nkey + j]
        rows.append(head + tuple(image.get(c.id) for c in st.all_cols) + tail_u + tail_o)
    return rows_to_batch(table, rows)


def _chunk_reader(db: str, table: TableSchema, feed: FeedSpec, bounds: list[list[Any]]) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column("id").to_pylist():
                out = read_chunk(db, table, feed, bounds, int(i))
                if out.num_rows:
                    yield out

    return fn


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
    from pyspark.sql.pandas.types import from_arrow_schema

    from changefeed.formats.base import get_encoder

    dbp = Path(db).absolute()
    table = load_table(dbp, feed.table_id)
    enc = encoder or get_encoder(feed.format)
    plan = load_or_plan(dbp, feed, table, chunk_rows)
    bounds, total = plan["bounds"], plan["total"]
    nchunks = len(bounds) + 1
    par = max(2, int(spark.sparkContext.defaultParallelism))
    ngroups = -(-nchunks // par)
    done = _groups_done(dbp, feed.id)
    store = TopicStore(dbp)
    schema = from_arrow_schema(change_schema(table))
    writer = f"{job.writer_id(feed)}-scan"
    for g in range(done, ngroups):
        lo, hi = g * par, min(nchunks, (g + 1) * par)
        df = spark.range(lo, hi, numPartitions=hi - lo).mapInArrow(_chunk_reader(str(dbp), table, feed, bounds), schema)
        encoded = enc.encode_spark(df, table, feed)
        job.write_encoded(encoded, store, feed, writer, g, None, par)
        scanned = min(total, hi * plan["chunk_rows"])
        job.write_progress(dbp, feed.id, feed.created_seq, feed.created_wall, feed.created_logical,
                           {"scanned": scanned, "total": total, "groups_done": g + 1})
        if on_progress is not None:
            on_progress(feed, scanned, total)
    conn = job.engine_conn(dbp)
    try:
        conn.execute("UPDATE _feeds SET state = 'running' WHERE id = ? AND state = 'scanning'", (feed.id,))
    finally:
        conn.close()
    job.write_progress(dbp, feed.id, _delivered_seq(dbp, feed), feed.created_wall, feed.created_logical,
                       {"scanned": total, "total": total, "groups_done": ngroups})
    if on_progress is not None:
        on_progress(feed, total, total)


def _delivered_seq(db: Path, feed: FeedSpec) -> int:
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        row = conn.execute("SELECT seq FROM _progress WHERE feed_id = ?", (feed.id,)).fetchone()
    finally:
        conn.close()
    return feed.created_seq if row is None else max(feed.created_seq, int(row[0]))


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
