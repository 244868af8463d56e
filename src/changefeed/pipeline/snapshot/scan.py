"""INITIAL_SCAN: export the rows that existed when a feed was created, while writes go on.

The snapshot S is the feed's creation point (``created_seq`` in the change stream, timestamp
``created_wall/created_logical/created_tx``). No read transaction is held across the scan: the
base table ``t<id>`` is cut into key-range chunks (boundaries computed once and saved in
``DB/checkpoints/feed-<id>.scan`` so a restart re-reads the very same chunks), and each chunk is
read by one Spark task in its own short read transaction (``chunks.read_chunk_batches``). The
snapshot rows go through the feed's encoder to its topic before the feed's streaming query
starts, so every key's snapshot record precedes its updates.

Throughput: a group is many chunks (``GROUP_ROWS`` rows, a multiple of the core count, fixed in
the plan file) so the cost of a Spark job is paid a few times per scan, not per chunk. Into the
embedded topics each chunk's task reads, encodes and appends its own records
(:func:`_append_chunk`: one append per topic partition under writer ``feed-<id>-scanc<chunk>``,
batch id = the chunk's group), so the appends run on every core and no record passes through
the driver; group g's progress is recorded after its Spark job, and a restarted group's chunks
skip the partitions they already wrote. Into a sink (webhook, cloud storage) a group's encoded
records are collected on the driver as Arrow and appended from there under writer
``feed-<id>-scan`` (one append per topic partition, in group order) while a background thread
already runs the next group's Spark job; at most two groups are in flight.

How a chunk task encodes: with an encoder that has a column-wise face (``ColumnarEncoder``, the
CockroachDB JSON encoder) the task that read the chunk encodes it with Arrow kernels and appends
it, all in one Python worker (:func:`append_chunks_batch`): the rows never cross into the JVM.
Otherwise the chunk's stored ``c<id>`` columns cross to the JVM (the columns equal on every
snapshot row are Spark literals, which also lets Spark fold the encoder's branches on
``op``/``ox``), are encoded on Spark, and come back to the appending task (:func:`snapshot_frame`,
:func:`chunk_appender`). A task's memory stays bounded by its chunk.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from changefeed.durable_files import write_durably
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT, change_schema
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.feeds.spec import FeedSpec
from changefeed.pipeline.delivery import append, progress
from changefeed.pipeline.delivery.families import family_batch, family_frame
from changefeed.pipeline.sinks import SinkWriter, open_delivery
from changefeed.pipeline.snapshot import chunks
from changefeed.pipeline.snapshot.chunks import compute_bounds, read_chunk_batches
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from changefeed.formats.base import ColumnarEncoder, Encoder

#: Rows per group (one Spark job, one batch id of the scan's writer).
GROUP_ROWS = int(os.environ.get("CHANGEFEED_SCAN_GROUP_ROWS", "800000"))


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
    write_durably(path, pickle.dumps(plan))
    return plan


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


def _append_chunk(
    store: TopicStore, topic: str, writer: str, batch_id: int, chunk: int, records: list[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Append one scan chunk's encoded records: one append per topic partition under
    ``<writer>c<chunk>``, each partition's records in the chunk's row order, starting at a
    partition rotated by the chunk's number (concurrent tasks start on different partitions
    instead of queueing for one partition's write lock). Idempotent on its own: a restarted
    scan skips the partitions the chunk already wrote."""
    got = [b for b in records if b.num_rows]
    ordered: list[pa.RecordBatch] = []
    if got:
        t = pa.Table.from_batches(got)
        del got
        parts = store.topic(topic).partitions
        turn = pc.add(t.column("partition"), pa.scalar(parts - chunk % parts, pa.int32()))
        order = pc.sort_indices(pc.if_else(pc.less(turn, parts), turn, pc.subtract(turn, parts)))
        ordered = t.take(order).to_batches()
    yield from append.partition_appender(store, topic, f"{writer}c{chunk}", batch_id, None)(iter(ordered))


def chunk_appender(
    store: TopicStore, topic: str, writer: str, batch_id: int, first_chunk: int = 0
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function over one scan chunk's encoded records (the task's partition index
    counts the chunks from ``first_chunk``): :func:`_append_chunk`."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        chunk = first_chunk + (0 if ctx is None else ctx.partitionId())
        yield from _append_chunk(store, topic, writer, batch_id, chunk, list(batches))

    return fn


def append_chunks(
    encoded: DataFrame, store: TopicStore, topic: str, writer: str, batch_id: int, first_chunk: int = 0
) -> None:
    """Run the Spark job whose tasks append their own chunk's encoded records (one Spark
    partition per chunk, numbered from ``first_chunk``): :func:`chunk_appender`."""
    fn = chunk_appender(store, topic, writer, batch_id, first_chunk)
    encoded.select("partition", "key", "value", "ts").mapInArrow(fn, "partition int, n long").collect()


def append_chunks_batch(
    spark: SparkSession,
    db: str,
    passes: Sequence[tuple[TableSchema, str]],
    feed: FeedSpec,
    bounds: list[list[Any]],
    lo: int,
    hi: int,
    encoder: ColumnarEncoder,
    store: TopicStore,
    topic: str,
    batch_id: int,
) -> None:
    """:func:`append_chunks` of chunks ``lo .. hi-1`` with the encoder's column-wise face, in one
    Spark job: each task reads its chunk (``read_chunk_batches``), encodes it (``encode_batch``)
    and appends it (:func:`_append_chunk`) in one Python worker; no row crosses into the JVM and
    back. ``passes``: (schema, writer) of each pass over the chunk, appended in that order (a
    schema change's backfill: the old schema's duplicates, then the new schema's rows). A pass
    whose columns the last pass's schema has is not read again: it takes those columns."""
    last = passes[-1][0]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in batches:
            for i in b.column("id").to_pylist():
                chunk = list(read_chunk_batches(db, last, feed, bounds, int(i), arrow=True))
                for schema, writer in passes:
                    rows = _columns_of(chunk, change_schema(schema))
                    if rows is None:
                        rows = list(read_chunk_batches(db, schema, feed, bounds, int(i), arrow=True))
                    out = [
                        rb
                        for r in rows
                        for rb in encoder.encode_batch(
                            family_batch(r, schema, feed), schema, feed
                        ).to_batches()
                    ]
                    yield from _append_chunk(store, topic, writer, batch_id, int(i), out)

    spark.range(lo, hi, numPartitions=max(1, hi - lo)).mapInArrow(fn, "partition int, n long").collect()


def _columns_of(batches: list[pa.RecordBatch], target: pa.Schema) -> list[pa.RecordBatch] | None:
    """``batches`` narrowed to the columns of ``target``, or None when one is missing or of
    another type."""
    if batches and any(
        batches[0].schema.get_field_index(f.name) < 0 or batches[0].schema.field(f.name).type != f.type
        for f in target
    ):
        return None
    return [b.select(target.names) for b in batches]


def _append_group(
    store: TopicStore | SinkWriter, topic: str, writer: str, batch_id: int, records: pa.Table
) -> None:
    """One append per topic partition of a group's records (sorted by partition), from the driver."""
    for _ in append.partition_appender(store, topic, writer, batch_id, None)(iter(records.to_batches())):
        pass


#: An initial scan of at most this many rows runs on the driver, without Spark (a small table's
#: scan costs less than a Spark job's planning); 0 turns that off.
DRIVER_SCAN_ROWS = int(os.environ.get("CHANGEFEED_DRIVER_SCAN_ROWS", "20000"))


def scan_rows(db: str | Path, feed: FeedSpec) -> int:
    """Rows the initial scan of ``feed`` exports (from its saved plan, planned now if none)."""
    dbp = Path(db).absolute()
    table = _schema_at_creation(dbp, feed)
    return int(load_or_plan(dbp, feed, table, chunks.CHUNK_ROWS, 0)["total"])


def _scan_on_driver(
    dbp: Path,
    feed: FeedSpec,
    table: TableSchema,
    enc: Encoder,
    store: TopicStore | SinkWriter,
    writer: str,
    plan: dict[str, Any],
    per: int,
    done: int,
    progressed: Callable[[int], None],
) -> None:
    """The scan's groups read, encoded (the encoder's Python face) and appended in this process:
    the same chunks, writers, batch ids and progress as on Spark, so either may resume the other."""
    bounds = plan["bounds"]
    nchunks = len(bounds) + 1
    for g in range(done, -(-nchunks // per)):
        group: list[pa.Table] = []
        for i in range(g * per, min(nchunks, (g + 1) * per)):
            out = [
                b
                for r in read_chunk_batches(str(dbp), table, feed, bounds, i, arrow=False)
                for b in append.encode_rows(r, table, enc, feed).to_batches()
            ]
            if isinstance(store, TopicStore):
                for _ in _append_chunk(store, feed.topic, writer, g, i, out):
                    pass
            elif out:
                group.append(pa.Table.from_batches(out))
        if not isinstance(store, TopicStore):
            records = pa.concat_tables(group) if group else None
            store.begin_batch(writer, g)  # a transactional sink: one transaction a group
            if records is not None:
                records = records.take(pc.sort_indices(records, sort_keys=[("partition", "ascending")]))
                _append_group(store, feed.topic, writer, g, records)
            store.commit_batch(writer, g)
        progressed(g)


def run_initial_scan(
    spark: SparkSession | None,
    db: str | Path,
    feed: FeedSpec,
    *,
    on_progress: Callable[[FeedSpec, int, int], None] | None = None,
    encoder: Encoder | None = None,
    chunk_rows: int | None = None,
) -> None:
    """Run (or resume) the initial scan of ``feed``, then switch it to 'running'. ``spark``
    None: on the driver, without Spark (a small table: :data:`DRIVER_SCAN_ROWS`)."""

    # Spark's modules load here, not at import: core changefeeds read snapshots through
    # read_chunk_batches with no Spark in the process.
    from changefeed.formats.base import ColumnarEncoder, get_encoder

    dbp = Path(db).absolute()
    table = _schema_at_creation(dbp, feed)
    enc = encoder or get_encoder(feed.format)
    rows = chunks.CHUNK_ROWS if chunk_rows is None else chunk_rows
    plan = load_or_plan(dbp, feed, table, rows, 0 if spark is None else _group_chunks(spark, rows))
    bounds, total = plan["bounds"], plan["total"]
    nchunks = len(bounds) + 1
    par = 2 if spark is None else max(2, int(spark.sparkContext.defaultParallelism))
    # Chunks per Spark job (= per group, one batch id): fixed in the plan, so a resumed scan cuts
    # the very same groups. Plans written before the key existed used one chunk per core.
    per = int(plan.get("group_chunks") or par)
    ngroups = -(-nchunks // per)
    done = _groups_done(dbp, feed.id)
    store = open_delivery(dbp, feed, table)  # the topics, or a job's webhook / cloud-storage sink
    writer = f"{progress.writer_id(feed)}-scan"

    def collect(g: int) -> pa.Table:
        assert spark is not None
        lo, hi = g * per, min(nchunks, (g + 1) * per)
        df = snapshot_frame(spark, str(dbp), table, feed, bounds, lo, hi)
        return _collect_encoded(enc.encode_spark(family_frame(df, table, feed), table, feed))

    def progressed(g: int) -> None:
        scanned = min(total, min(nchunks, (g + 1) * per) * plan["chunk_rows"])
        progress.write_progress(
            dbp,
            feed.id,
            feed.created_seq,
            feed.created_wall,
            feed.created_logical,
            {"scanned": scanned, "total": total, "groups_done": g + 1},
        )
        if on_progress is not None:
            on_progress(feed, scanned, total)

    if spark is None:
        _scan_on_driver(dbp, feed, table, enc, store, writer, plan, per, done, progressed)
    elif isinstance(store, TopicStore):
        # Into the embedded topics every chunk task appends its own records (``chunk_appender``):
        # no records through the driver, appends on every core. Group g's progress is recorded
        # after its Spark job, so a restart re-runs it, and its chunks skip what they appended.
        for g in range(done, ngroups):
            lo, hi = g * per, min(nchunks, (g + 1) * per)
            if any(
                (store.committed_batch(feed.topic, p, writer) or -1) >= g for p in range(feed.partitions)
            ):  # a group begun by a version that appended whole groups from the driver
                _append_group(store, feed.topic, writer, g, collect(g))
            elif isinstance(enc, ColumnarEncoder):
                append_chunks_batch(
                    spark, str(dbp), [(table, writer)], feed, bounds, lo, hi, enc, store, feed.topic, g
                )
            else:
                df = snapshot_frame(spark, str(dbp), table, feed, bounds, lo, hi)
                encoded = enc.encode_spark(family_frame(df, table, feed), table, feed)
                append_chunks(encoded, store, feed.topic, writer, g, first_chunk=lo)
            progressed(g)
    else:
        _scan_to_sink(collect, store, feed.topic, writer, done, ngroups, progressed)
    conn = progress.engine_conn(dbp)
    try:
        conn.execute("UPDATE _feeds SET state = 'running' WHERE id = ? AND state = 'scanning'", (feed.id,))
    finally:
        conn.close()
    progress.write_progress(
        dbp,
        feed.id,
        max(feed.created_seq, progress.delivered_seq(dbp, feed.id) or 0),
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
                if not isinstance(store, TopicStore):
                    store.begin_batch(writer, g)  # a transactional sink: one transaction a group
                _append_group(store, topic, writer, g, records)
                if not isinstance(store, TopicStore):
                    store.commit_batch(writer, g)
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
    from changefeed.pipeline.sources.journal import load_table

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
