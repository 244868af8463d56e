"""``changefeed run``: topics, initial scans, one streaming query per feed, retention and GC."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.exceptions import ChangefeedError, DatabaseError, PipelineError
from changefeed.feeds import runners
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.store import all_feeds
from changefeed.pipeline import crdb_jobs, total_order
from changefeed.pipeline.delivery.progress import ACTIVE_STATES, checkpoint_dir
from changefeed.pipeline.snapshot import backfill
from changefeed.pipeline.stream import query as job
from changefeed.pipeline.stream import resolved as job_resolved
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

FEED_POLL_S = 3.0
RETENTION_EVERY_S = 60.0
GC_EVERY_S = 60.0
#: Consecutive failures of a CockroachDB job's feed query before the job fails (or pauses).
JOB_RETRIES = 3

ScanProgress = Callable[[FeedSpec, int, int], None]


def check_db(db: str | Path) -> Path:
    p = Path(db).absolute()
    if not (p / DB_FILE).exists():
        raise DatabaseError(f"{p} is not a changefeed database (no {DB_FILE})")
    return p


def feed_specs(db: Path) -> list[tuple[FeedSpec, str]]:
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        return [(f.spec, f.state) for f in all_feeds(conn)]
    finally:
        conn.close()


def sync_topics(db: Path, feeds: list[tuple[FeedSpec, str]]) -> None:
    """Ensure every feed's topic exists.

    Never drops one: a topic lives until someone deletes it (``DROP CHANGEFEED``, ``DROP TABLE``
    of a YDB feed's table, or a Kafka client's DeleteTopics). Topics that belong to no feed are
    Kafka clients' own, or a canceled CockroachDB job's output, which CockroachDB leaves in place.
    """
    store = TopicStore(db)
    for f, _ in feeds:
        store.ensure_topic(f.topic, f.partitions, f.retention_ns)


def _start(spark: SparkSession, db: Path, f: FeedSpec, jobs: dict[int, Any], **kw: Any) -> StreamingQuery:
    """A feed's streaming query; a CockroachDB job's feed stops at the job's end_time."""
    job_ = jobs.get(f.id)
    return job.start_feed_query(
        spark,
        db,
        f,
        end=None if job_ is None else job_.end,
        crdb_job=job_,
        # every feed: a micro-batch holding a schema change is encoded in each side's schema
        # (YDB feeds too: their messages before a DROP COLUMN keep the column)
        schema_changes=backfill.SchemaChanges(),
        **kw,
    )


def _scan_all(
    spark: SparkSession, db: Path, feeds: list[tuple[FeedSpec, str]], on_progress: ScanProgress | None
) -> None:
    from changefeed.pipeline.snapshot.scan import run_initial_scan

    for f, state in feeds:
        if state == "scanning":
            run_initial_scan(spark, db, f, on_progress=on_progress)


def _columns(db: Path, f: FeedSpec) -> tuple[int, ...]:
    """The ids of the stored columns of ``f``'s table now (() once the table is gone)."""
    from changefeed.pipeline.sources.journal import load_table

    try:
        return tuple(c.id for c in load_table(db, f.table_id).stored)
    except ChangefeedError:
        return ()


def warm(spark: SparkSession) -> SparkSession:
    """Start the executors' Python workers (an Arrow round trip) before the first micro-batch,
    which otherwise pays several seconds of worker start-up inside the delivery path."""
    import pyarrow as pa

    def identity(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from batches

    n = max(2, int(spark.sparkContext.defaultParallelism))
    spark.range(0, n, numPartitions=n).mapInArrow(identity, "id long").collect()
    return spark


def run_until_idle(
    db: str | Path,
    *,
    spark: SparkSession | None = None,
    on_progress: ScanProgress | None = None,
    gc: bool = True,
    **kw: Any,
) -> None:
    """Deliver everything committed before the call, then return (and trim the change stream)."""
    from changefeed.pipeline.spark.session import get_spark

    dbp = check_db(db)
    spark = spark or warm(get_spark())
    feeds = feed_specs(dbp)
    sync_topics(dbp, feeds)
    total = total_order.total_feed_ids(dbp)  # ordering = 'total' jobs deliver without Spark
    feeds = [(f, s) for f, s in feeds if f.id not in total]
    if total:
        total_order.deliver_all(dbp)
    _scan_all(spark, dbp, feeds, on_progress)
    jobs = crdb_jobs.job_of_feeds(dbp)
    queries = [
        (f, _start(spark, dbp, f, jobs, available_now=True, **kw))
        for f, s in feeds
        if s in ACTIVE_STATES and crdb_jobs.streams(jobs.get(f.id))
    ]
    errors = []
    for f, q in queries:
        try:
            job.await_query(q, f, checkpoint_dir(dbp, f.id))
        except PipelineError as exc:
            errors.append(exc)  # a job's feed too: the job stays running, the next run retries
    job_resolved.flush(dbp)  # multi-feed jobs: their frontier once every feed has caught up
    crdb_jobs.advance(dbp)
    if errors:
        raise errors[0]
    if gc:
        _gc(dbp)


def _gc(db: Path) -> None:
    from changefeed.engine.database import Database
    from changefeed.engine.gc import collect_garbage

    try:
        database = Database(db, create=False)
        try:
            collect_garbage(database)
        finally:
            database.close()
    except Exception as exc:  # GC is best effort
        log.warning("change stream GC failed: %s", exc)


def _batches_done(q: StreamingQuery) -> int:
    progress: dict[str, Any] | None = q.lastProgress
    return int(progress.get("batchId", -1)) if progress else -1


def _stop_between_batches(q: StreamingQuery, timeout_s: float = 60.0) -> None:
    """Stop a query while no trigger is executing (stop() mid-batch can crash Spark's interrupt)."""
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
        log.warning("stopping %s: %s", q.name, exc)


def run_forever(
    db: str | Path,
    *,
    spark: SparkSession | None = None,
    stop: threading.Event | None = None,
    on_progress: ScanProgress | None = None,
    install_signals: bool = True,
    **kw: Any,
) -> None:
    """Run every feed continuously until ``stop`` is set (or SIGINT/SIGTERM)."""
    from changefeed.pipeline.spark.session import get_spark

    dbp = check_db(db)
    stop = stop or threading.Event()
    signals = install_signals and threading.current_thread() is threading.main_thread()

    def on_signals() -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())

    if signals:
        on_signals()
    session: list[SparkSession] = [spark] if spark is not None else []

    def spark_session() -> SparkSession:
        """Spark, started when a feed first needs it (ordering = 'total' jobs alone never do)."""
        if not session:
            session.append(warm(get_spark()))
            if signals:
                on_signals()  # again: creating a SparkContext installs PySpark's own SIGINT handler
        return session[0]

    running: dict[int, tuple[FeedSpec, StreamingQuery]] = {}
    failures: dict[int, int] = {}
    columns: dict[int, tuple[int, ...]] = {}  # a job feed's table columns when its query started
    last_retention = last_gc = 0.0
    presence = runners.presence(dbp)
    presence.__enter__()  # PAUSE JOB asks for pause-requested while this runner lives
    try:
        while not stop.is_set():
            feeds = feed_specs(dbp)
            sync_topics(dbp, feeds)
            total = total_order.total_feed_ids(dbp)  # ordering = 'total' jobs: delivered below
            feeds = [(f, s) for f, s in feeds if f.id not in total]
            if total:
                try:
                    total_order.deliver_all(dbp)
                except ChangefeedError as total_exc:
                    if isinstance(total_exc, DatabaseError):
                        raise
                    log.warning("ordering = 'total' delivery failed: %s; retrying", total_exc)
            jobs = crdb_jobs.job_of_feeds(dbp)
            live = {f.id: (f, s) for f, s in feeds if s in ACTIVE_STATES}
            for fid in [i for i in running if i not in live]:
                _stop_between_batches(running.pop(fid)[1])

            def failed(fid: int, message: str, jobs: Any = jobs) -> None:
                if fid not in jobs:
                    raise PipelineError(message)
                # A job's feed is retried (restarted at the next poll, from its checkpoint);
                # after JOB_RETRIES failures in a row its job fails (or pauses: on_error).
                failures[fid] = failures.get(fid, 0) + 1
                if failures[fid] >= JOB_RETRIES:
                    failures.pop(fid)
                    crdb_jobs.record_failure(dbp, fid, message)
                else:
                    log.warning("%s; retrying (%d of %d)", message, failures[fid], JOB_RETRIES)

            for fid, (f, q) in list(running.items()):
                if not q.isActive:
                    exc = q.exception()
                    running.pop(fid)
                    if exc is not None:
                        failed(fid, job.failure_message(exc, f, checkpoint_dir(dbp, f.id)))
                elif fid in failures and _batches_done(q) >= 1:
                    failures.pop(fid)  # delivering again
            for fid in [i for i in running if _columns(dbp, running[i][0]) != columns.get(i)]:
                # a feed's table gained or lost a column: restart its query in the new schema
                # (until then its batches are read again in their schema: pipeline/snapshot/backfill.py)
                _stop_between_batches(running.pop(fid)[1])
            for fid, (f, state) in live.items():
                if fid in running or stop.is_set():
                    continue
                if state == "scanning":
                    from changefeed.pipeline.snapshot.scan import run_initial_scan

                    try:
                        run_initial_scan(spark_session(), dbp, f, on_progress=on_progress)
                    except ChangefeedError as exc:  # (issue 10) a job's sink failing its scan: retried too
                        if isinstance(exc, DatabaseError):
                            raise
                        failed(fid, f"feed {fid} ({f.topic}) failed: {exc}")
                        continue
                if not crdb_jobs.streams(jobs.get(fid)):
                    continue  # initial_scan='only': advance() finishes it
                columns[fid] = _columns(dbp, f)
                running[fid] = (f, _start(spark_session(), dbp, f, jobs, available_now=False, **kw))
            crdb_jobs.advance(dbp, running_feeds=running.keys())
            now = time.monotonic()
            if now - last_retention >= RETENTION_EVERY_S:
                TopicStore(dbp).apply_retention()
                last_retention = now
            if now - last_gc >= GC_EVERY_S:
                _gc(dbp)
                last_gc = now
            stop.wait(FEED_POLL_S)
    finally:
        for _, q in running.values():
            _stop_between_batches(q)
        presence.__exit__(None, None, None)
