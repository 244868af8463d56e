"""The changefeed job: one Structured Streaming query per feed, journal -> encoder -> topic.

Shape of one micro-batch (``foreachBatch(df, batch_id)``):

1. ``df`` is the journal source's rows ``start < seq <= end`` (whole transactions only);
2. ``encoder.encode_spark`` turns them into ``partition, key, value, ts`` (JVM-side);
3. ``monotonically_increasing_id()`` numbers them in journal order (the source's input
   partitions are consecutive seq ranges, so the id order is the seq order), then
   ``repartition(n, partition)`` + ``sortWithinPartitions(partition, id)`` brings every topic
   partition's records together in commit order, and ``mapInArrow`` appends them *on the
   executors*: one ``TopicStore.append(topic, p, writer="feed-<id>", batch_id, records)`` per
   topic partition, each its own SQLite file, in parallel;
4. if the batch's end offset carries a freshly closed timestamp, a resolved record follows the data
   in the same append of every partition (partitions without data get a resolved-only append);
5. the feed's ``_progress`` row is upserted (high water, delivered seq).

A micro-batch of at most ``DRIVER_ENCODE_ROWS`` journal rows (a continuous job's usual batch)
skips steps 1-3's Spark job: the driver reads its rows (the same seq range, from the offset log)
and encodes them with the encoder's Python face (``encode_python``, byte for byte the same
records), then appends them as in step 3. Planning and scheduling a Spark job over the wide
encoder expression costs ~0.5 s whatever the batch size; this keeps a small batch's cost to its
rows. The offsets, appends, idempotence markers and progress are the same either way.

The append is idempotent per (writer, batch id) and partition, and Spark replays the same batch id
with the same offsets after a crash, so every change reaches the topic exactly once. The batch's
end offset is read from the query's own offset log (``<checkpoint>/offsets/<batch id>``), written
by Spark before the batch runs, so resolved timestamps replay deterministically too.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from changefeed.engine.catalog import TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.exceptions import PipelineError
from changefeed.feeds import jobs as J
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.store import FeedRow, all_feeds
from changefeed.observe import NULL_PIPELINE_METRICS, PipelineMetrics
from changefeed.pipeline import job_resolved
from changefeed.pipeline.families import family_batch, family_frame
from changefeed.pipeline.journal_source import closed_of, load_table
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from changefeed.formats.base import Encoder, Record
    from changefeed.pipeline.backfill import SchemaChanges
    from changefeed.pipeline.job_resolved import JobResolved
    from changefeed.pipeline.sinks import SinkWriter

#: Rows per micro-batch (admission control of the journal source).
DEFAULT_MAX_ROWS = int(os.environ.get("CHANGEFEED_MAX_ROWS_PER_BATCH", "500000"))
DEFAULT_TRIGGER = os.environ.get("CHANGEFEED_TRIGGER", "100 milliseconds")
#: Micro-batches of at most this many journal rows are appended from the driver in one stage
#: (latency); larger ones are shuffled by topic partition and appended on the executors (throughput).
SMALL_BATCH_ROWS = int(os.environ.get("CHANGEFEED_SMALL_BATCH_ROWS", "20000"))
#: Micro-batches of at most this many journal rows are read and encoded on the driver through the
#: encoder's Python face, without a Spark job (a continuous job's latency); 0 turns that off.
DRIVER_ENCODE_ROWS = int(os.environ.get("CHANGEFEED_DRIVER_ENCODE_ROWS", "20000"))
ACTIVE_STATES = ("running", "scanning")
#: How often a CockroachDB job's feed without ``resolved`` closes a timestamp.
CRDB_CLOSE_NS = 5_000_000_000

_RECORDS = pa.schema(
    [pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("ts", pa.int64())]
)


def checkpoint_dir(db: str | Path, feed_id: int) -> Path:
    return Path(db).absolute() / "checkpoints" / f"feed-{feed_id}"


def writer_id(feed: FeedSpec, epoch: str = "") -> str:
    """The topic writer of a feed's streaming query. A checkpoint made after an earlier one was
    removed gets its own ``epoch``: its batch ids restart at 0, and must not be taken for the
    old checkpoint's (already delivered) batches by the topic's idempotence markers."""
    return f"feed-{feed.id}" + (f"-e{epoch}" if epoch else "")


EPOCH_FILE = "changefeed-epoch.json"


def checkpoint_start(db: Path, feed: FeedSpec, ckpt: Path) -> tuple[str, int]:
    """(writer epoch, journal position to start from) for the feed's query at ``ckpt``.

    An existing checkpoint keeps its epoch and Spark resumes from its own offsets. A new
    checkpoint for a feed that has delivered before (its old checkpoint was deleted) starts a new
    epoch at the feed's recorded progress: ``_progress`` is written after a batch's appends, so
    at most the last micro-batch is delivered again and nothing is lost."""
    path = ckpt / EPOCH_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        return str(saved["epoch"]), int(saved["start_seq"])
    if (ckpt / "offsets").exists():  # a checkpoint from before epochs existed
        return "", feed.created_seq
    progress = delivered_seq(db, feed.id)
    epoch, start = (
        ("", feed.created_seq) if progress is None else (os.urandom(4).hex(), max(progress, feed.created_seq))
    )
    ckpt.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"epoch": epoch, "start_seq": start}))
    os.replace(tmp, path)
    return epoch, start


def delivered_seq(db: Path, feed_id: int) -> int | None:
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        row = conn.execute("SELECT seq FROM _progress WHERE feed_id = ?", (feed_id,)).fetchone()
    finally:
        conn.close()
    return None if row is None else int(row[0])


# ------------------------------------------------------------------------------------------- DB
def engine_conn(db: str | Path) -> sqlite3.Connection:
    return open_sqlite(Path(db).absolute() / DB_FILE)


def active_feeds(db: str | Path) -> list[FeedRow]:
    conn = open_sqlite(Path(db).absolute() / DB_FILE, readonly=True)
    try:
        return [f for f in all_feeds(conn) if f.state in ACTIVE_STATES]
    finally:
        conn.close()


def write_progress(
    db: str | Path, feed_id: int, seq: int, wall: int, logical: int, detail: dict[str, Any] | None = None
) -> None:
    conn = engine_conn(db)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("SELECT 1 FROM _feeds WHERE id = ?", (feed_id,)).fetchone() is not None:
                conn.execute(
                    "INSERT INTO _progress (feed_id, seq, wall, logical, updated_ns, detail) VALUES (?, ?, ?, ?, ?, ?)"
                    " ON CONFLICT (feed_id) DO UPDATE SET seq = excluded.seq, wall = max(wall, excluded.wall),"
                    " logical = CASE WHEN excluded.wall > wall OR (excluded.wall = wall AND excluded.logical > logical)"
                    " THEN excluded.logical ELSE logical END, updated_ns = excluded.updated_ns, detail = excluded.detail",
                    (
                        feed_id,
                        seq,
                        wall,
                        logical,
                        time.time_ns(),
                        None if detail is None else json.dumps(detail),
                    ),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    finally:
        conn.close()


def _ts_at(db: str | Path, table_id: int, seq: int) -> tuple[int, int] | None:
    conn = open_sqlite(Path(db).absolute() / DB_FILE, readonly=True)
    try:
        row = conn.execute(
            f"SELECT ts, lg FROM x{table_id} WHERE seq <= ? ORDER BY seq DESC LIMIT 1", (seq,)
        ).fetchone()
    except sqlite3.OperationalError:
        row = None
    finally:
        conn.close()
    return None if row is None else (int(row[0]), int(row[1]))


# ------------------------------------------------------------------------------------------- offsets
def batch_end_offset(checkpoint: Path, batch_id: int) -> dict[str, Any]:
    """The source end offset of ``batch_id`` from the query's offset log."""
    path = checkpoint / "offsets" / str(batch_id)
    try:
        lines = path.read_text().splitlines()
        return dict(json.loads(lines[2]))
    except (OSError, IndexError, ValueError) as exc:
        raise PipelineError(
            f"cannot read the offset log {path} of batch {batch_id} ({exc}); the checkpoint is unreadable: "
            f"delete {checkpoint}: the feed then resumes from its last recorded progress (the last micro-batch "
            "may be delivered twice; nothing is lost)"
        ) from None


def batch_rows(checkpoint: Path, batch_id: int, end: dict[str, Any]) -> int | None:
    """Journal rows in ``batch_id`` (end minus the previous batch's end), or None if unknown."""
    if batch_id == 0:
        return None
    try:
        prev = batch_end_offset(checkpoint, batch_id - 1)
    except PipelineError:
        return None
    return max(0, int(end.get("seq", 0)) - int(prev.get("seq", 0)))


# ------------------------------------------------------------------------------------------- writing
def _make_writer(
    store: TopicStore | SinkWriter, topic: str, writer: str, batch_id: int, resolved: tuple[bytes, int] | None
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """mapInArrow function: rows sorted by (partition, order) -> one append per topic partition."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        current: int | None = None
        pending: list[pa.RecordBatch] = []
        done_p: list[int] = []
        done_n: list[int] = []

        def flush() -> None:
            if current is None:
                return
            t = pa.Table.from_batches(pending) if pending else _RECORDS.empty_table()
            t = t.select(["key", "value", "ts"]).cast(_RECORDS)
            if resolved is not None:
                t = pa.concat_tables(
                    [
                        t,
                        pa.table(
                            {
                                "key": pa.array([None], pa.binary()),
                                "value": [resolved[0]],
                                "ts": [resolved[1]],
                            },
                            schema=_RECORDS,
                        ),
                    ]
                )
            store.append(topic, current, writer, batch_id, t)
            done_p.append(current)
            done_n.append(t.num_rows)

        for b in batches:
            if b.num_rows == 0:
                continue
            vals = b.column("partition").to_numpy(zero_copy_only=False)
            cuts = [0, *(np.flatnonzero(np.diff(vals)) + 1).tolist(), len(vals)]
            for lo, hi in itertools.pairwise(cuts):
                p = int(vals[lo])
                if p != current:
                    flush()
                    current = p
                    pending = []
                pending.append(b.slice(lo, hi - lo))
        flush()
        yield pa.RecordBatch.from_arrays(
            [pa.array(done_p, pa.int32()), pa.array(done_n, pa.int64())], names=["partition", "n"]
        )

    return write


def _nbytes(b: pa.RecordBatch | pa.Table) -> int:
    """Key and value bytes of the records in ``b``."""
    total = 0
    for name in ("key", "value"):
        got = pc.sum(pc.binary_length(b.column(name))).as_py()
        total += int(got or 0)
    return total


_STATS_SCHEMA = "partition int, n long, bytes long, oldest long"


def _with_stats(
    fn: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A writer function that also reports the key and value bytes and the oldest commit of the
    records it was given (on its first output row: ``partition, n, bytes, oldest``)."""

    def wrapped(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen = [0, None]

        def tee() -> Iterator[pa.RecordBatch]:
            for b in batches:
                if b.num_rows:
                    seen[0] = int(seen[0] or 0) + _nbytes(b)
                    low = pc.min(b.column("ts")).as_py()
                    if low is not None and (seen[1] is None or low < int(seen[1])):
                        seen[1] = int(low)
                yield b

        first = True
        for rb in fn(tee()):
            n = rb.num_rows
            yield pa.RecordBatch.from_arrays(
                [
                    rb.column("partition"),
                    rb.column("n"),
                    pa.array([int(seen[0] or 0) if first and i == 0 else 0 for i in range(n)], pa.int64()),
                    pa.array([seen[1] if first and i == 0 else None for i in range(n)], pa.int64()),
                ],
                names=["partition", "n", "bytes", "oldest"],
            )
            first = first and n == 0

    return wrapped


@dataclass
class BatchStats:
    """What one micro-batch appended: messages, key and value bytes, the oldest commit (wall ns)."""

    messages: int = 0
    nbytes: int = 0
    oldest_ns: int | None = None

    def add(self, n: int, nbytes: int, oldest: int | None) -> None:
        self.messages += int(n)
        self.nbytes += int(nbytes)
        if oldest is not None and oldest > 0 and (self.oldest_ns is None or oldest < self.oldest_ns):
            self.oldest_ns = int(oldest)

    def add_rows(self, rows: Iterable[Any]) -> dict[int, int]:
        """Fold the writer's output rows (``partition, n, bytes, oldest``); {partition: n}."""
        out: dict[int, int] = {}
        for r in rows:
            p, n, b, t = (r["partition"], r["n"], r["bytes"], r["oldest"]) if not isinstance(r, tuple) else r
            out[int(p)] = int(n)
            self.add(int(n), int(b), None if t is None else int(t))
        return out


def append_on_driver(
    table: pa.Table,
    store: TopicStore | SinkWriter,
    feed: FeedSpec,
    writer: str,
    batch_id: int,
    resolved: tuple[bytes, int] | None,
    stats: BatchStats | None = None,
) -> dict[int, int]:
    """Append encoded records (``partition, key, value, ts`` in journal order) from this process:
    stable-sorted by topic partition, one append per partition; {topic partition: records}."""
    table = table.take(pc.sort_indices(table, sort_keys=[("partition", "ascending")]))
    fn = _with_stats(_make_writer(store, feed.topic, writer, batch_id, resolved))
    stats = stats if stats is not None else BatchStats()
    out: dict[int, int] = {}
    for rb in fn(iter(table.to_batches())):
        cols = [rb.column(c).to_pylist() for c in ("partition", "n", "bytes", "oldest")]
        out.update(stats.add_rows(zip(*cols, strict=True)))
    return out


def encode_on_driver(
    db: Path, table: TableSchema, encoder: Encoder, feed: FeedSpec, lo: int, hi: int
) -> pa.Table:
    """The records of journal rows ``lo < seq <= hi`` through the encoder's Python face, read and
    encoded in this process (no Spark job): ``partition, key, value, ts`` in journal order, the
    same records ``encode_spark`` gives (the two faces agree byte for byte)."""
    from changefeed.pipeline.journal_source import read_table

    rows = read_table(db, table, lo, hi).combine_chunks()
    return encode_rows(rows.to_batches()[0] if rows.num_rows else None, table, encoder, feed)


def encode_rows(
    rows: pa.RecordBatch | None, table: TableSchema, encoder: Encoder, feed: FeedSpec
) -> pa.Table:
    """Change rows (the change stream's schema) through the encoder's Python face, in this
    process: ``partition, key, value, ts`` in row order."""
    from changefeed.formats.base import ColumnarEncoder

    recs: list[Record] = []
    if rows is not None and rows.num_rows:
        batch = family_batch(rows, table, feed)
        if batch.num_rows and isinstance(encoder, ColumnarEncoder):
            return encoder.encode_batch(batch, table, feed)  # column-wise: no tuple per record
        if batch.num_rows:
            recs = encoder.encode_python(batch, table, feed)
    cols: list[tuple[Any, ...]] = list(zip(*recs, strict=True)) if recs else [(), (), (), ()]
    return pa.table(
        [
            pa.array(cols[0], pa.int32()),
            pa.array(cols[1], pa.binary()),
            pa.array(cols[2], pa.binary()),
            pa.array(cols[3], pa.int64()),
        ],
        names=["partition", "key", "value", "ts"],
    )


def write_encoded(
    encoded: DataFrame,
    store: TopicStore | SinkWriter,
    feed: FeedSpec,
    writer: str,
    batch_id: int,
    resolved: tuple[bytes, int] | None,
    shuffle_partitions: int,
    small: bool = False,
    stats: BatchStats | None = None,
) -> dict[int, int]:
    """Append encoded records (in the DataFrame's row order per topic partition) on the executors;
    returns {topic partition: records appended}."""
    from pyspark.sql import functions as F

    stats = stats if stats is not None else BatchStats()
    if small:
        # One stage: collect as Arrow (journal order: the source's partitions are consecutive seq
        # ranges), append from the driver.
        table = encoded.select("partition", "key", "value", "ts").toArrow()
        return append_on_driver(table, store, feed, writer, batch_id, resolved, stats)

    ordered = (
        encoded.select("partition", "key", "value", "ts", F.monotonically_increasing_id().alias("_o"))
        .repartition(max(1, min(shuffle_partitions, feed.partitions)), "partition")
        .sortWithinPartitions("partition", "_o")
    )
    fn = _with_stats(_make_writer(store, feed.topic, writer, batch_id, resolved))
    return stats.add_rows(ordered.mapInArrow(fn, _STATS_SCHEMA).collect())


@dataclass
class FeedContext:
    db: Path
    feed: FeedSpec
    table: TableSchema
    encoder: Encoder
    store: TopicStore | SinkWriter  # a job's webhook / cloud-storage sink writer, else the topics
    checkpoint: Path
    shuffle_partitions: int
    writer: str = ""
    last_progress: float = 0.0
    #: a CockroachDB job of several feeds: its job-wide resolved messages (``job_resolved.py``)
    job_resolved: JobResolved | None = None
    #: the journal position the streaming query started after (batch 0's lower end)
    start_seq: int = 0
    #: a CockroachDB job's feed: schema changes split its batches (``backfill.py``, set by the runner)
    schema_changes: SchemaChanges | None = None
    #: the job failed at a schema change (``schema_change_policy='stop'``): deliver nothing more
    stopped: bool = False
    #: where delivered batches are counted, under ``label`` (a YDB feed's topic, a job's id)
    metrics: PipelineMetrics = NULL_PIPELINE_METRICS
    label: str = ""

    def driver_can_deliver(self, batch_id: int) -> bool:
        """Whether batch ``batch_id`` (its offsets written) can be delivered without Spark: few
        enough rows, and no schema change in its range."""
        if self.stopped:
            return True
        end = batch_end_offset(self.checkpoint, batch_id)
        rows = self._rows(batch_id, end)
        if rows is None or not 0 < DRIVER_ENCODE_ROWS >= rows:
            return rows == 0
        changes = self.schema_changes
        return (
            changes is None
            or changes.plan(self.db, self.feed, self.table, self.checkpoint, batch_id, end) is None
        )

    def _rows(self, batch_id: int, end: dict[str, Any]) -> int | None:
        if batch_id == 0:
            return max(0, int(end.get("seq", 0)) - self.start_seq)
        return batch_rows(self.checkpoint, batch_id, end)

    def deliver(self, df: DataFrame | None, batch_id: int) -> None:
        """Deliver micro-batch ``batch_id`` (``foreachBatch``); ``df`` None: on the driver alone
        (:meth:`driver_can_deliver` said it can)."""
        if self.stopped:
            return
        t0 = time.monotonic_ns()
        stats = BatchStats()
        self._deliver(df, batch_id, stats)
        self.metrics.emitted(
            self.label, stats.messages, stats.nbytes, stats.oldest_ns, time.monotonic_ns() - t0
        )

    def _deliver(self, df: DataFrame | None, batch_id: int, stats: BatchStats) -> None:
        feed = self.feed
        end = batch_end_offset(self.checkpoint, batch_id)
        closed = closed_of(end)
        changes = self.schema_changes
        plan = (
            None
            if changes is None
            else changes.plan(self.db, feed, self.table, self.checkpoint, batch_id, end)
        )
        stop = None if plan is None else plan.stop
        if stop is not None:  # schema_change_policy='stop': resolve just below the change, then fail
            below = stop.just_before()
            closed = (below.wall, below.logical, stop.tx)
        resolved: tuple[bytes, int] | None = None
        if closed is not None and feed.resolved_ns and self.job_resolved is None:
            wall, logical, tx = closed
            resolved = (self.encoder.resolved(CommitTs(wall, logical), tx, feed), wall)
        rows = self._rows(batch_id, end)
        sink = None if isinstance(self.store, TopicStore) else self.store
        if df is None and not ((plan is None or changes is None) and rows is not None):
            raise PipelineError(f"feed {feed.id} ({feed.topic}): batch {batch_id} needs Spark")
        if (
            (plan is None or changes is None)
            and rows is not None
            and (df is None or 0 < DRIVER_ENCODE_ROWS >= rows)
        ):
            # a small batch: read and encoded here, no Spark job (its planning and scheduling
            # would cost more than the rows); same records, same appends, same checkpoint
            lo = int(end.get("seq", 0)) - rows
            written = append_on_driver(
                encode_on_driver(self.db, self.table, self.encoder, feed, lo, lo + rows)
                if rows
                else encode_rows(None, self.table, self.encoder, feed),
                self.store,
                feed,
                self.writer,
                batch_id,
                resolved if sink is None else None,
                stats,
            )
        elif df is None:
            raise PipelineError(f"feed {feed.id} ({feed.topic}): batch {batch_id} needs Spark")
        elif plan is None or changes is None:
            encoded = self.encoder.encode_spark(family_frame(df, self.table, feed), self.table, feed)
            written = write_encoded(
                encoded,
                self.store,
                feed,
                self.writer,
                batch_id,
                resolved if sink is None else None,
                self.shuffle_partitions,
                small=(rows is not None and rows <= SMALL_BATCH_ROWS)
                or (sink is not None and sink.driver_only),
                stats=stats,
            )
        else:  # schema changes in or at the batch's range (pipeline/backfill.py)
            written = changes.deliver(
                df.sparkSession,
                self.db,
                df,
                plan,
                self.encoder,
                feed,
                self.store,
                self.writer,
                batch_id,
                resolved if sink is None else None,
                self.shuffle_partitions,
                sink is not None and sink.driver_only,
            )
            stats.add(sum(written.values()), 0, None)
        if resolved is not None and sink is not None and closed is not None:
            # sinks: one resolved message, after every partition's data was acknowledged
            sink.emit_resolved(feed.topic, self.writer, batch_id, resolved[0], CommitTs(closed[0], closed[1]))
        elif resolved is not None:
            got = set(written)
            rec = pa.table(
                {"key": pa.array([None], pa.binary()), "value": [resolved[0]], "ts": [resolved[1]]},
                schema=_RECORDS,
            )
            for p in range(feed.partitions):
                if p not in got:
                    self.store.append(feed.topic, p, self.writer, batch_id, rec)
                    stats.add(1, 0, None)
        seq = int(end.get("seq", feed.created_seq)) if stop is None else stop.seq
        hw = _ts_at(self.db, feed.table_id, seq) or (feed.created_wall, feed.created_logical)
        if closed is not None and (closed[0], closed[1]) > hw:
            hw = (closed[0], closed[1])
        write_progress(self.db, feed.id, seq, hw[0], hw[1])
        if self.job_resolved is not None:
            self.job_resolved.advance()
        if plan is not None and changes is not None and batch_id > 0:
            # the backfill scan plans of earlier batches' changes: those batches are committed
            with contextlib.suppress(PipelineError):
                changes.forget(
                    self.db, feed, int(batch_end_offset(self.checkpoint, batch_id - 1).get("seq", 0))
                )
        if stop is not None:
            from changefeed.pipeline.crdb_jobs import record_failure

            record_failure(self.db, feed.id, stop.stop_message())
            self.stopped = True  # the runner stops the query: its feed is failed now


def feed_context(
    db: str | Path,
    feed: FeedSpec,
    *,
    parallelism: int = 2,
    max_rows: int = DEFAULT_MAX_ROWS,
    encoder: Encoder | None = None,
    end: CommitTs | None = None,
    crdb_job: J.Job | None = None,
    schema_changes: SchemaChanges | None = None,
    metrics: PipelineMetrics = NULL_PIPELINE_METRICS,
    label: str = "",
) -> tuple[FeedContext, dict[str, str]]:
    """What delivers one feed's micro-batches (its topic must exist), and its journal source's
    options (``changefeed-journal``): the same for a Spark query and for the driver's batches.
    ``end``: deliver nothing committed after it (a CockroachDB job's ``end_time``); ``crdb_job``:
    the job the feed belongs to (its resolved messages are job-wide when it has several feeds)."""
    from changefeed.formats.base import get_encoder
    from changefeed.pipeline.sinks import open_delivery

    dbp = Path(db).absolute()
    table = load_table(dbp, feed.table_id)
    enc = encoder or get_encoder(feed.format)
    ckpt = checkpoint_dir(dbp, feed.id)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    epoch, start_seq = checkpoint_start(dbp, feed, ckpt)
    ctx = FeedContext(
        db=dbp,
        feed=feed,
        table=table,
        encoder=enc,
        store=open_delivery(dbp, feed, table),
        checkpoint=ckpt,
        shuffle_partitions=max(2, parallelism),
        writer=writer_id(feed, epoch),
        start_seq=start_seq,
        schema_changes=schema_changes,
        metrics=metrics,
        label=label or feed.topic,
    )
    if crdb_job is not None:
        ctx.job_resolved = job_resolved.for_job(dbp, crdb_job, feed, enc, ctx.store)
    options = {
        "path": str(dbp),
        "table_id": str(feed.table_id),
        "start_seq": str(start_seq),
        "maxRowsPerBatch": str(max_rows),
    }
    # Closed timestamps: resolved messages; a CockroachDB job's feed closes them without
    # ``resolved`` too (its high water advances on an idle table, and a schema change after
    # the last row gets the micro-batch that delivers its backfill: pipeline/backfill.py).
    close_ns = feed.resolved_ns or (CRDB_CLOSE_NS if feed.crdb is not None else None)
    if close_ns:
        options["resolved_ns"] = str(close_ns)
    if end is not None:
        options["end_wall"] = str(end.wall)
        options["end_logical"] = str(end.logical)
    return ctx, options


def start_feed_query(
    spark: SparkSession,
    db: str | Path,
    feed: FeedSpec,
    *,
    available_now: bool,
    trigger: str = DEFAULT_TRIGGER,
    max_rows: int = DEFAULT_MAX_ROWS,
    encoder: Encoder | None = None,
    end: CommitTs | None = None,
    crdb_job: J.Job | None = None,
    schema_changes: SchemaChanges | None = None,
    metrics: PipelineMetrics = NULL_PIPELINE_METRICS,
    label: str = "",
    context: tuple[FeedContext, dict[str, str]] | None = None,
) -> StreamingQuery:
    """Start the streaming query of one feed (its topic must exist): :func:`feed_context`'s
    delivery as ``foreachBatch`` over its journal source (``context``: one made already)."""
    ctx, options = context or feed_context(
        db,
        feed,
        parallelism=int(spark.sparkContext.defaultParallelism),
        max_rows=max_rows,
        encoder=encoder,
        end=end,
        crdb_job=crdb_job,
        schema_changes=schema_changes,
        metrics=metrics,
        label=label,
    )
    reader = spark.readStream.format("changefeed-journal")
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load()
    writer = (
        df.writeStream.foreachBatch(ctx.deliver)
        .option("checkpointLocation", str(ctx.checkpoint))
        .queryName(f"feed-{feed.id}")
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=trigger)
    try:
        return writer.start()
    except Exception as exc:  # an unreadable checkpoint surfaces here
        raise PipelineError(
            f"feed {feed.id} ({feed.topic}): could not start its streaming query: {_short(exc)}; if the checkpoint "
            f"{ctx.checkpoint} is damaged, delete it: the feed then resumes from its last recorded progress "
            "(the last micro-batch may be delivered twice; nothing is lost)"
        ) from None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:500] if text else type(exc).__name__


_CHECKPOINT_ERRORS = (
    "MALFORMED_LOG_FILE",
    "UNSUPPORTED_LOG_VERSION",
    "CheckpointFileManager",
    "OffsetSeqLog",
    "checkpoint",
)


def failure_message(exc: BaseException, feed: FeedSpec, checkpoint: Path | None) -> str:
    """One line saying which feed failed and why; for a damaged checkpoint, where and what to do."""
    text = str(exc)
    causes = re.findall(r"\[([A-Z_]{4,})\] ([^\n]*?)(?= SQLSTATE|\n|$)", text)
    cause = f"[{causes[-1][0]}] {causes[-1][1]}" if causes else _short(exc)
    cause = cause.encode("ascii", "backslashreplace").decode()[:300]
    if checkpoint is not None and any(s in text for s in _CHECKPOINT_ERRORS):
        return (
            f"feed {feed.id} ({feed.topic}): its checkpoint {checkpoint} is unreadable: {cause}; delete it: the feed then "
            "resumes from its last recorded progress (the last micro-batch may be delivered twice; nothing is lost)"
        )
    return f"feed {feed.id} ({feed.topic}) failed: {cause}"


def await_query(query: StreamingQuery, feed: FeedSpec, checkpoint: Path | None = None) -> None:
    try:
        query.awaitTermination()
    except Exception as exc:
        raise PipelineError(failure_message(exc, feed, checkpoint)) from None
