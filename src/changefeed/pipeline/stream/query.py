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
4. if the batch's end offset carries a freshly closed timestamp, a resolved record goes into the
   same append of every partition, after every record at or below its time and before the batch's
   later ones (partitions without data get a resolved-only append);
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
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from changefeed.durable_files import sync_file
from changefeed.engine.catalog import TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.exceptions import PipelineError
from changefeed.feeds import jobs as J
from changefeed.feeds.spec import FeedSpec, barrier_of
from changefeed.observe import NULL_PIPELINE_METRICS, PipelineMetrics
from changefeed.pipeline import crdb_jobs
from changefeed.pipeline.delivery.append import (
    RECORDS,
    BatchStats,
    append_on_driver,
    encode_on_driver,
    encode_rows,
    write_encoded,
)
from changefeed.pipeline.delivery.families import family_frame
from changefeed.pipeline.delivery.progress import (
    batch_end_offset,
    batch_rows,
    checkpoint_dir,
    checkpoint_start,
    ts_at,
    write_progress,
    writer_id,
)
from changefeed.pipeline.sinks import open_delivery
from changefeed.pipeline.sources.journal import closed_of, load_table
from changefeed.pipeline.stream import resolved as job_resolved
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from changefeed.formats.base import Encoder
    from changefeed.pipeline.sinks import SinkWriter
    from changefeed.pipeline.snapshot.backfill import SchemaChanges
    from changefeed.pipeline.stream.resolved import JobResolved

#: Rows per micro-batch (admission control of the journal source).
DEFAULT_MAX_ROWS = int(os.environ.get("CHANGEFEED_MAX_ROWS_PER_BATCH", "500000"))
DEFAULT_TRIGGER = os.environ.get("CHANGEFEED_TRIGGER", "100 milliseconds")
#: Micro-batches of at most this many journal rows are appended from the driver in one stage
#: (latency); larger ones are shuffled by topic partition and appended on the executors (throughput).
SMALL_BATCH_ROWS = int(os.environ.get("CHANGEFEED_SMALL_BATCH_ROWS", "20000"))
#: Micro-batches of at most this many journal rows are read and encoded on the driver through the
#: encoder's Python face, without a Spark job (a continuous job's latency); 0 turns that off.
DRIVER_ENCODE_ROWS = int(os.environ.get("CHANGEFEED_DRIVER_ENCODE_ROWS", "20000"))
#: How often a CockroachDB job's feed without ``resolved`` closes a timestamp.
CRDB_CLOSE_NS = 5_000_000_000


def record_ts(feed: FeedSpec, wall: int, logical: int) -> int:
    """The topic record time of a resolved record: a YDB feed's barrier time (its payload is the
    barrier ``[step, 0]``: the closed timestamp rounded down to the interval), else the closed time."""
    if feed.kind == "ydb" and feed.resolved_ns:
        return barrier_of(CommitTs(wall, logical), feed.resolved_ns).wall
    return wall


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
        enough rows (``DRIVER_ENCODE_ROWS``), and no schema change in its range."""
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
        # The batch's planned offsets are durable before any of its records is appended: lost
        # in a power loss after a durable append, the batch id would be planned afresh over
        # more rows and skipped as already delivered (Spark writes the file without syncing).
        sync_file(self.checkpoint / "offsets" / str(batch_id))
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
            resolved = (
                self.encoder.resolved(CommitTs(wall, logical), tx, feed),
                record_ts(feed, wall, logical),
            )
        rows = self._rows(batch_id, end)
        sink = None if isinstance(self.store, TopicStore) else self.store
        if sink is not None:
            sink.begin_batch(self.writer, batch_id)  # a transactional sink: one transaction
        small = rows is not None and (df is None or 0 < DRIVER_ENCODE_ROWS >= rows)
        if (plan is None or changes is None) and small and rows is not None:
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
        else:  # schema changes in or at the batch's range (pipeline/snapshot/backfill.py)
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
        if sink is not None:
            sink.commit_batch(self.writer, batch_id)  # before the progress: the job advances after it
        if resolved is not None and sink is None:
            got = set(written)
            rec = pa.table(
                {"key": pa.array([None], pa.binary()), "value": [resolved[0]], "ts": [resolved[1]]},
                schema=RECORDS,
            )
            for p in range(feed.partitions):
                if p not in got:
                    self.store.append(feed.topic, p, self.writer, batch_id, rec)
                    stats.add(1, 0, None)
        seq = int(end.get("seq", feed.created_seq)) if stop is None else stop.seq
        hw = ts_at(self.db, feed.table_id, seq) or (feed.created_wall, feed.created_logical)
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
            crdb_jobs.record_failure(self.db, feed.id, stop.stop_message())
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
        if feed.kind == "ydb" and feed.resolved_ns:
            options["resolved_aligned"] = "true"  # barriers at once after each interval
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


def stop_between_batches(q: StreamingQuery, timeout_s: float = 60.0) -> None:
    """Stop a query while no trigger is executing (stop() mid-batch can crash Spark's interrupt)."""
    import logging
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not q.isActive or not q.status.get("isTriggerActive", False):
                break
        except Exception:
            break
        time.sleep(0.02)
    try:
        q.stop()
    except Exception as exc:
        logging.getLogger(__name__).warning("stopping %s: %s", q.name, exc)


def await_query(query: StreamingQuery, feed: FeedSpec, checkpoint: Path | None = None) -> None:
    try:
        query.awaitTermination()
    except Exception as exc:
        raise PipelineError(failure_message(exc, feed, checkpoint)) from None
