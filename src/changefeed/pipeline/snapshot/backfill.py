"""Schema changes in CockroachDB changefeed jobs: the backfill, on Spark, in bulk.

A table's schema history (``engine/schema_history.py``: each ``ADD``/``DROP COLUMN`` with its
commit timestamp and change-stream position ``S``) splits a feed's micro-batch ``(lo, hi]`` into
parts, delivered in this order (:func:`deliver_plan`: each segment under a writer of its own, so
a replayed batch skips what it appended and every topic partition keeps the order):

1. change rows ``<= S``, encoded in the schema before the change;
2. what ``schema_change_events`` / ``schema_change_policy`` ask for at the change:
   * ``backfill`` (the default): every row of the table once more in the old schema (the
     duplicates the spec shows), then once in the new one. Each pass is a consistent scan at
     ``S`` (``scan.snapshot_frame``: the current rows with the changes after ``S`` undone
     through their old images, one Spark task per key-range chunk of the change's saved scan
     plan), stamped with the change's timestamp (``updated``), encoded by the feed's encoder on
     Spark, and appended by the chunk's own task, like the initial scan;
   * ``nobackfill``: only the duplicates (the old schema);
   * ``stop``: nothing more: the rows before the change are delivered (and resolved just below
     it), then the job fails with CockroachDB's ``shut down due to schema change and
     schema_change_policy="stop": schema change occurred at <hlc>``;
   * ``ignore``, or a change the events do not count (``default``: a column added with a
     default or a stored computed value, or dropped; ``column_changes``: any column added or
     dropped): nothing;
3. change rows ``> S``, in the new schema.

Rows are encoded straight from the micro-batch's DataFrame while it has the columns of their
schema; rows whose schema gained a column after the streaming query started are read again
from the change stream in that schema (a Spark job over seq ranges).

Which batch a change belongs to is decided from the query's offset log alone, so a replayed
batch repeats it exactly: a change is *covered* by a batch ending at ``hi`` when ``S < hi``, or
``S == hi`` and the change is at or below the batch's closed timestamp or committed before the
batch was planned (Spark's ``batchTimestampMs``); it is delivered by the first batch that covers
it (never one covering it only at or before the feed's start).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import change_schema, read_changes
from changefeed.engine.clock import CommitTs
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.engine.schema_history import SchemaChange, history, schema_at
from changefeed.feeds.crdb_options import (
    SCHEMA_CHANGE_POLICY_BACKFILL,
    SCHEMA_CHANGE_POLICY_IGNORE,
    SCHEMA_CHANGE_POLICY_NOBACKFILL,
    SCHEMA_CHANGE_POLICY_STOP,
    triggers_backfill,
)
from changefeed.feeds.spec import FeedSpec
from changefeed.pipeline.delivery.append import write_encoded
from changefeed.pipeline.delivery.families import family_frame
from changefeed.pipeline.delivery.progress import EPOCH_FILE, delivered_seq
from changefeed.pipeline.snapshot import chunks
from changefeed.pipeline.snapshot.scan import (
    append_chunks,
    append_chunks_batch,
    load_or_plan,
    plan_path,
    snapshot_frame,
)
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from changefeed.formats.base import Encoder
    from changefeed.pipeline.sinks import SinkWriter

#: Change-stream seqs per task when rows are read again in a newer schema.
REREAD_SEQS = 50_000


# ------------------------------------------------------------------------------------------ plan
@dataclass(frozen=True, slots=True)
class Rows:
    """Change rows ``lo < seq <= hi`` in ``schema``."""

    lo: int
    hi: int
    schema: TableSchema


@dataclass(frozen=True, slots=True)
class Backfill:
    """One pass over the whole table in ``schema`` as of ``change``."""

    change: SchemaChange
    schema: TableSchema


@dataclass(frozen=True, slots=True)
class BatchPlan:
    parts: tuple[Rows | Backfill, ...]
    #: ``schema_change_policy = 'stop'``: the change that ends the job after ``parts``
    stop: SchemaChange | None = None


@dataclass(frozen=True, slots=True)
class Cover:
    """What a batch of the offset log covers: its end ``seq``, closed timestamp and plan time."""

    seq: int
    closed: CommitTs | None
    planned_ns: int

    def covers(self, c: SchemaChange) -> bool:
        if c.seq < self.seq:
            return True
        if c.seq > self.seq:
            return False
        return (self.closed is not None and c.at <= self.closed) or c.at.wall < self.planned_ns


def read_cover(checkpoint: Path, batch_id: int) -> Cover | None:
    """The offset log entry of ``batch_id`` as a :class:`Cover`, or None if it is gone."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
        meta = json.loads(lines[1])
        end = json.loads(lines[2])
    except (OSError, IndexError, ValueError):
        return None
    closed = end.get("closed")
    return Cover(
        int(end.get("seq", 0)),
        None if not closed else CommitTs(int(closed[0]), int(closed[1])),
        int(meta.get("batchTimestampMs", 0)) * 1_000_000,
    )


def plan_batch(db: Path, feed: FeedSpec, current: TableSchema, prev: Cover, cover: Cover) -> BatchPlan | None:
    """The parts of the micro-batch ``(prev.seq, cover.seq]`` of ``feed``, or None when the
    stream's DataFrame (in schema ``current``) delivers it as it is: no schema change in or at
    its range, and its rows are in ``current``."""
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        changes = history(conn, feed.table_id)
    finally:
        conn.close()
    lo, hi = prev.seq, cover.seq
    start = CommitTs(feed.created_wall, feed.created_logical)
    due = [
        c
        for c in changes
        if c.at > start and c.seq >= feed.created_seq and cover.covers(c) and not prev.covers(c)
    ]
    splits = [c for c in changes if lo <= c.seq < hi]
    if not due and not splits:
        if hi <= lo:  # no rows (a batch that only closes a timestamp): nothing to read in any schema
            return None
        schema = schema_at(changes, hi, current)
        if [c.id for c in schema.stored] == [c.id for c in current.stored]:
            return None
        return BatchPlan((Rows(lo, hi, schema),))  # the stream started in an older schema
    opts = feed.crdb
    points = sorted({c.seq for c in [*due, *splits]} | {hi})
    parts: list[Rows | Backfill] = []
    a = lo
    for s in points:
        if s > a:
            parts.append(Rows(a, min(s, hi), schema_at(changes, min(s, hi), current)))
            a = min(s, hi)
        for c in (c for c in due if c.seq == s):
            if opts is None or not triggers_backfill(c.old, c.new, opts):
                continue
            policy = opts.schema_change_policy
            if policy == SCHEMA_CHANGE_POLICY_IGNORE:
                continue
            if policy == SCHEMA_CHANGE_POLICY_STOP:
                return BatchPlan(tuple(parts), stop=c)
            dropped = {x.id for x in c.old.stored} - {x.id for x in c.new.stored}
            if not dropped:  # the old shape of a dropped column can no longer be read
                parts.append(Backfill(c, c.old))
            if policy == SCHEMA_CHANGE_POLICY_BACKFILL:
                parts.append(Backfill(c, c.new))
            else:
                assert policy == SCHEMA_CHANGE_POLICY_NOBACKFILL
    return BatchPlan(tuple(parts))


# ------------------------------------------------------------------------------------------ frames
def _reader(db: str, schema: TableSchema, lo: int, step: int, hi: int) -> Any:
    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        conn = open_sqlite(Path(db) / DB_FILE, readonly=True)
        try:
            for b in batches:
                for i in b.column("id").to_pylist():
                    a = lo + int(i) * step
                    out = read_changes(conn, schema, a, min(a + step, hi))
                    if out.num_rows:
                        yield out
        finally:
            conn.close()

    return fn


def changes_frame(spark: SparkSession, db: Path, schema: TableSchema, lo: int, hi: int) -> DataFrame:
    """Change rows ``lo < seq <= hi`` read again in ``schema`` (one task per REREAD_SEQS seqs)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    n = max(1, -(-(hi - lo) // REREAD_SEQS))
    step = -(-(hi - lo) // n) if hi > lo else 1
    return spark.range(0, n, numPartitions=n).mapInArrow(
        _reader(str(db), schema, lo, step, hi), from_arrow_schema(change_schema(schema))
    )


def _plan_name(change: SchemaChange) -> str:
    return f"backfill-{change.seq}"


def backfill_chunks(db: Path, feed: FeedSpec, part: Backfill) -> tuple[list[list[Any]], FeedSpec]:
    """The key-range chunks of a backfill pass (the change's saved scan plan: a replay cuts the
    same chunks) and the feed spec that reads and encodes it: ``feed`` as if created at the
    change (its snapshot point and timestamp)."""

    c = part.change
    at = replace(
        feed, created_seq=c.seq, created_wall=c.at.wall, created_logical=c.at.logical, created_tx=c.tx
    )
    return load_or_plan(db, at, part.schema, chunks.CHUNK_ROWS, name=_plan_name(c))["bounds"], at


def backfill_frame(
    spark: SparkSession, db: Path, feed: FeedSpec, part: Backfill
) -> tuple[DataFrame, FeedSpec]:
    """Every row of the table as of ``part.change`` in ``part.schema`` (a consistent scan at the
    change's position, stamped with its timestamp, one Spark partition per key-range chunk of
    the change's saved scan plan), and the feed spec that encodes it."""

    bounds, at = backfill_chunks(db, feed, part)
    return snapshot_frame(spark, str(db), part.schema, at, bounds, 0, len(bounds) + 1), at


def forget_plans(db: Path, feed: FeedSpec, below_seq: int) -> None:
    """Drop the saved scan plans of backfills at changes below ``below_seq`` (their batches are
    committed: a replay never needs them again)."""

    for path in plan_path(db, feed.id, "backfill-*").parent.glob(f"feed-{feed.id}.backfill-*"):
        try:
            seq = int(path.name.rsplit("-", 1)[1])
        except ValueError:
            continue
        if seq < below_seq:
            path.unlink(missing_ok=True)


def _rows_frame(spark: SparkSession, db: Path, df: DataFrame, part: Rows) -> DataFrame:
    """The change rows of ``part``: from the micro-batch's DataFrame while it has their schema's
    columns, else read again from the change stream in that schema."""
    from pyspark.sql import functions as F

    names = change_schema(part.schema).names
    if set(names) <= set(df.columns):
        return df.filter((F.col("seq") > part.lo) & (F.col("seq") <= part.hi)).select(*names)
    return changes_frame(spark, db, part.schema, part.lo, part.hi)


def encode_plan(
    spark: SparkSession, db: Path, df: DataFrame, plan: BatchPlan, encoder: Encoder, feed: FeedSpec
) -> DataFrame:
    """The batch's records (``partition, key, value, ts``), part after part, as one DataFrame
    whose row order is the delivery order."""
    from pyspark.sql import functions as F

    frames: list[DataFrame] = []
    for part in plan.parts:
        if isinstance(part, Backfill):
            rows, spec = backfill_frame(spark, db, feed, part)
            frames.append(encoder.encode_spark(family_frame(rows, part.schema, spec), part.schema, spec))
            continue
        rows = _rows_frame(spark, db, df, part)
        frames.append(encoder.encode_spark(family_frame(rows, part.schema, feed), part.schema, feed))
    cols = ["partition", "key", "value", "ts"]
    if not frames:  # a stop at the batch's very start: nothing to deliver
        return df.limit(0).select(
            F.lit(None).cast("int").alias("partition"),
            F.lit(None).cast("binary").alias("key"),
            F.lit(None).cast("binary").alias("value"),
            F.lit(None).cast("long").alias("ts"),
        )
    out = frames[0].select(*cols)
    for f in frames[1:]:
        out = out.union(f.select(*cols))
    return out


def segments(parts: tuple[Rows | Backfill, ...]) -> list[tuple[Rows, ...] | Backfill]:
    """A plan's parts as delivery segments: each backfill pass alone, the change rows between
    them together."""
    out: list[tuple[Rows, ...] | Backfill] = []
    run: list[Rows] = []
    for part in parts:
        if isinstance(part, Backfill):
            if run:
                out.append(tuple(run))
                run = []
            out.append(part)
        else:
            run.append(part)
    if run:
        out.append(tuple(run))
    return out


def deliver_plan(
    spark: SparkSession,
    db: Path,
    df: DataFrame,
    plan: BatchPlan,
    encoder: Encoder,
    feed: FeedSpec,
    store: TopicStore | SinkWriter,
    writer: str,
    batch_id: int,
    resolved: tuple[bytes, int] | None,
    shuffle_partitions: int,
    small: bool,
) -> dict[int, int]:
    """Deliver micro-batch ``batch_id`` split by ``plan``; returns {topic partition: records}
    of its last append under ``writer`` (the caller appends ``resolved`` where there was none).

    Into the embedded topics the plan's segments are appended one after the other, each under a
    writer of its own (``<writer>-s<j>``; the last one under ``writer`` itself, with ``resolved``),
    so a replayed batch skips the segments it had appended and every topic partition keeps the
    plan's order. A backfill pass is one Spark job whose tasks each read, encode and append one
    key-range chunk (writer ``<segment writer>c<chunk>``): no shuffle, and the appends run on
    every core. The chunks are the change's saved scan plan, the same on a replay. With a
    column-wise encoder the passes of one change (old schema, new schema) are one job whose task
    reads its chunk once and appends the old pass's records, then the new pass's: every key's
    duplicate precedes its new-schema row, as in CockroachDB, where the backfill of one span
    does not wait for another's. A sink gets the whole batch as one DataFrame (``encode_plan``)."""
    from changefeed.formats.base import ColumnarEncoder

    if not isinstance(store, TopicStore):
        encoded = encode_plan(spark, db, df, plan, encoder, feed)
        return write_encoded(
            encoded, store, feed, writer, batch_id, resolved, shuffle_partitions, small=small
        )
    segs = segments(plan.parts)
    written: dict[int, int] = {}
    together: list[tuple[TableSchema, str]] = []  # the passes of one change, run as one job
    for j, seg in enumerate(segs):
        last = j == len(segs) - 1
        w = writer if last else f"{writer}-s{j}"
        if isinstance(seg, Backfill):
            if isinstance(encoder, ColumnarEncoder):  # read, encode and append in the Python tasks
                together.append((seg.schema, w))
                after = None if last else segs[j + 1]
                if isinstance(after, Backfill) and after.change == seg.change:
                    continue
                bounds, spec = backfill_chunks(db, feed, seg)
                n = len(bounds) + 1
                append_chunks_batch(
                    spark, str(db), together, spec, bounds, 0, n, encoder, store, feed.topic, batch_id
                )
                together = []
                continue
            rows, spec = backfill_frame(spark, db, feed, seg)
            encoded = encoder.encode_spark(family_frame(rows, seg.schema, spec), seg.schema, spec)
            append_chunks(encoded, store, feed.topic, w, batch_id)
            continue
        encoded = encode_plan(spark, db, df, BatchPlan(seg), encoder, feed)
        got = write_encoded(
            encoded, store, feed, w, batch_id, resolved if last else None, shuffle_partitions, small=small
        )
        if last:
            written = got
    return written


class SchemaChanges:
    """The schema-change face of a feed (``FeedContext.schema_changes``): a CockroachDB feed's
    backfill and policies; for a YDB feed only the split, so each change row is encoded in the
    schema it was committed in."""

    def plan(
        self,
        db: Path,
        feed: FeedSpec,
        table: TableSchema,
        checkpoint: Path,
        batch_id: int,
        end: dict[str, Any],
    ) -> BatchPlan | None:
        """How schema changes split micro-batch ``batch_id`` (``end``: its end offset), or None."""

        cover = read_cover(checkpoint, batch_id) or Cover(int(end.get("seq", feed.created_seq)), None, 0)
        prev = read_cover(checkpoint, batch_id - 1) if batch_id > 0 else None
        if prev is None:
            start = _start_seq(checkpoint, feed) if batch_id == 0 else delivered_seq(db, feed.id)
            prev = Cover(feed.created_seq if start is None else start, None, 0)
        return plan_batch(db, feed, table, prev, cover)

    deliver = staticmethod(deliver_plan)
    forget = staticmethod(forget_plans)


def _start_seq(checkpoint: Path, feed: FeedSpec) -> int | None:
    """Where the query of ``checkpoint`` started (its epoch file, ``delivery.progress.checkpoint_start``)."""

    try:
        return int(json.loads((checkpoint / EPOCH_FILE).read_text())["start_seq"])
    except (OSError, ValueError, KeyError):
        return None


__all__ = [
    "Backfill",
    "BatchPlan",
    "Cover",
    "Rows",
    "SchemaChanges",
    "backfill_chunks",
    "backfill_frame",
    "changes_frame",
    "deliver_plan",
    "encode_plan",
    "forget_plans",
    "plan_batch",
    "read_cover",
]
