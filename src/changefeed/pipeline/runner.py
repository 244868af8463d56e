"""``changefeed run``: the pipeline's entry points (to idle, continuously), over the one runner of
:mod:`changefeed.pipeline.node_runner` that a node runs too."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.exceptions import DatabaseError
from changefeed.feeds import runners
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.store import all_feeds
from changefeed.observe import NULL_PIPELINE_METRICS, PipelineMetrics
from changefeed.pipeline import job
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

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
    metrics: PipelineMetrics = NULL_PIPELINE_METRICS,
    on_phase: Callable[[str], None] | None = None,
    max_rows: int = job.DEFAULT_MAX_ROWS,
) -> None:
    """Deliver everything committed before the call, then return (and trim the change stream):
    :class:`~changefeed.pipeline.node_runner.Runner` to idle, holding the database's runner lock.
    A Spark session is made only if some feed needs one (``spark``: use this one)."""
    from changefeed.pipeline.node_runner import Runner

    dbp = check_db(db)
    with runners.claim(dbp, "run"):
        r = Runner(
            dbp, spark=spark, max_rows=max_rows, metrics=metrics, on_progress=on_progress, on_phase=on_phase
        )
        try:
            r.run(until_idle=True, gc=gc)
        finally:
            r.close()


def collect_garbage(db: Path) -> None:
    """Trim the change stream below what every feed delivered (best effort)."""
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


def run_forever(
    db: str | Path,
    *,
    spark: SparkSession | None = None,
    stop: threading.Event | None = None,
    on_progress: ScanProgress | None = None,
    install_signals: bool = True,
    claim_lock: bool = True,
    on_ready: Callable[[], None] | None = None,
    metrics: PipelineMetrics = NULL_PIPELINE_METRICS,
    on_phase: Callable[[str], None] | None = None,
    max_rows: int = job.DEFAULT_MAX_ROWS,
    warm_spark: bool = True,
) -> None:
    """Run every feed continuously until ``stop`` is set (or SIGINT/SIGTERM): the
    :class:`~changefeed.pipeline.node_runner.Runner` a node runs. ``claim_lock``: take the
    database's runner lock (False: the caller, a node, holds it)."""
    from changefeed.pipeline.node_runner import Runner

    dbp = check_db(db)
    stop = stop or threading.Event()
    if install_signals and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    with runners.claim(dbp, "run") if claim_lock else contextlib.nullcontext():
        r = Runner(
            dbp, spark=spark, max_rows=max_rows, metrics=metrics, on_progress=on_progress, on_phase=on_phase
        )
        try:
            if warm_spark and spark is None:
                r.warm_in_background()
            r.run(stop, on_ready=on_ready)
        finally:
            r.close()
