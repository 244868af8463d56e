"""``changefeed run`` and a node's pipeline: the one runner of the pipeline.

It keeps every active feed delivering with as little as each needs:

* **Small micro-batches on the driver, no Spark.** For each feed the runner plans the next
  micro-batch exactly as the feed's Spark query would (the same journal source options and
  ``latestOffset``: whole transactions, ``maxRowsPerBatch``, closed timestamps, ``end_time``),
  writes it to the feed's checkpoint as Spark would (:mod:`.offset_log`), delivers it with the
  feed's :class:`~changefeed.pipeline.stream.query.FeedContext` on the driver (the encoders' Python face,
  the same appends, idempotence markers and progress), then commits it. A live feed's batch
  holds what committed since the last one: a few rows, delivered in milliseconds.
* **Spark for what needs it.** A batch of more than ``CHANGEFEED_DRIVER_ENCODE_ROWS`` rows, or
  one holding a schema change, is left planned and the feed's Spark query runs ``availableNow``
  on its checkpoint: it delivers that batch (same offsets) and the rest of the backlog in large
  batches, then ends. Initial scans larger than ``CHANGEFEED_DRIVER_SCAN_ROWS`` run on Spark too. The Spark session is made only when
  something needs it (``run --until-idle`` on a small backlog starts none); a node warms it in
  the background at start so a large backlog or a new feed's initial scan does not wait for it.
* **``ordering = 'total'`` jobs** (``pipeline/total_order.py``) are delivered each round by
  :func:`total_order.deliver_all` on the driver, not as feeds: their changes merge across tables.
* **Woken by commits, not by a timer per feed.** Between rounds the runner waits on the
  database's commit signal (a commit in this process, e.g. through the node's pg endpoint,
  wakes it at once) or :data:`POLL_S` (commits of other processes: one read of the commit
  clock and of the feeds' version tells whether anything changed). A feed, job, pause, resume,
  cancel or drop (``feeds_version``) or a schema change (``catalog_version``) is picked up
  within one round, without a restart and without a new Spark session.

One runner per database (:func:`changefeed.feeds.runners.claim`), and each feed it delivers
under its own lock (:func:`~changefeed.feeds.runners.try_feed_lock`): the destination of an
asynchronous replication delivers its local source's replication feeds (``pipeline/replication/``,
ticked from here), and the source's own pipeline leaves those to it while it holds them. Each feed's failure is its
own: retried with exponential backoff (a job's feed fails its job after ``JOB_RETRIES`` in a
row, or pauses it with ``on_error='pause'``), logged once per retry wave, never stopping the
others. Stopping (``stop`` set) happens between micro-batches.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changefeed.engine.database import DB_FILE, commit_signal, open_sqlite
from changefeed.exceptions import ChangefeedError, DatabaseError, PipelineError
from changefeed.feeds import jobs as J, replication as R, runners
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.status import feed_label, job_label, set_running_status
from changefeed.feeds.store import all_feeds, feeds_version
from changefeed.observe import NULL_PIPELINE_METRICS, PipelineMetrics
from changefeed.pipeline import crdb_jobs, total_order
from changefeed.pipeline.delivery import offset_log
from changefeed.pipeline.delivery.progress import ACTIVE_STATES, checkpoint_dir
from changefeed.pipeline.replication.runner import ReplicationRunner
from changefeed.pipeline.sinks.base import RETRYABLE
from changefeed.pipeline.stream import query as job, resolved as job_resolved
from changefeed.pipeline.stream.query import FeedContext
from changefeed.stop_signals import stop_on_signals
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from changefeed.pipeline.sources.journal import JournalStreamReader

log = logging.getLogger("changefeed.pipeline")


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


#: Seconds between two looks at the commit clock when nothing in this process commits (another
#: process's commit waits at most this long; this process's own commits wake the runner at once).
POLL_S = 0.1
#: Seconds between recording jobs' progress (high water, done, paused) in ``_jobs``; at once when
#: the feeds' version moved (a pause asked for, say).
ADVANCE_S = 2.0
RETENTION_EVERY_S = 60.0
GC_EVERY_S = 60.0
#: Seconds between two ticks of the database's asynchronous replications (a new, altered or
#: dropped one is picked up within this).
REPLICATION_TICK_S = 1.0
#: Seconds between two tries at the lock of a feed another process delivers.
BLOCKED_RETRY_S = 1.0
#: Consecutive failures of a CockroachDB job's feed before the job fails (or pauses).
JOB_RETRIES = 3
#: Backoff after a feed's failure: first wait, doubling up to the maximum (CockroachDB: 10 min).
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 600.0
#: A Kafka sink's refusal that retrying cannot fix (``kafka sink ...``: authorization, message too
#: large, unknown topic with auto-creation off): the job fails at once, or pauses (``on_error``).
TERMINAL_SINK = "kafka sink "
#: Micro-batches one feed delivers per round before the others get their turn.
BATCHES_PER_ROUND = 20

ScanProgress = Callable[[FeedSpec, int, int], None]


class NeedsSpark(Exception):
    """A feed's next micro-batch must run on Spark."""


@dataclass
class FeedWork:
    """One active feed as the runner delivers it."""

    spec: FeedSpec
    state: str
    job: J.Job | None
    label: str
    ctx: FeedContext | None = None
    options: dict[str, str] = field(default_factory=dict)
    reader: JournalStreamReader | None = None
    columns: tuple[int, ...] = ()
    failures: int = 0
    retry_at: float = 0.0
    idle_target: bool = False  # run --until-idle: the reader's target was fixed
    done: bool = False  # run --until-idle: delivered everything up to the target
    delivered: int = 0
    caught_up: bool = False  # the first idle round after start logs "caught up"
    #: the last batch id planned (offsets) and delivered (commits): read once, then kept
    planned: int | None = None
    committed: int | None = None
    #: wall ns when the feed's source closes its next timestamp (nothing to do before, if no commit)
    next_close_ns: int = 0
    #: the feed's own lock (``feeds.runners.try_feed_lock``), held while this runner delivers it
    lock: int | None = None


class Runner:
    """Delivers every active feed of a database; see the module docstring."""

    def __init__(
        self,
        db: str | Path,
        *,
        metrics: PipelineMetrics = NULL_PIPELINE_METRICS,
        spark: SparkSession | None = None,
        max_rows: int = job.DEFAULT_MAX_ROWS,
        on_progress: ScanProgress | None = None,
        on_phase: Callable[[str], None] | None = None,
    ) -> None:
        self.db = Path(db).absolute()
        self.metrics = metrics
        self._spark = spark
        self._spark_lock = threading.Lock()
        self.max_rows = max_rows
        self.on_progress = on_progress
        self.on_phase = on_phase or (lambda _phase: None)
        self.works: dict[int, FeedWork] = {}
        self.jobs: dict[int, J.Job] = {}
        self.errors: list[ChangefeedError] = []
        self._versions: tuple[int, int] | None = None
        self._clock: tuple[int, int] | None = None
        self._conn = open_sqlite(self.db / DB_FILE, readonly=True)
        self.signal = commit_signal(self.db / DB_FILE)
        self._stop = threading.Event()
        #: feeds another process delivers (the destination of an asynchronous replication runs
        #: its local source's replication feeds): looked at again every BLOCKED_RETRY_S
        self.blocked: set[int] = set()
        #: this database's asynchronous replications (it is their destination), made when it has one
        self.replicating: ReplicationRunner | None = None
        self.total_orders = False  # some job has ordering = 'total'

    # -- Spark, only when needed -------------------------------------------------------------
    def spark(self) -> SparkSession:
        with self._spark_lock:
            if self._spark is None:
                from changefeed.pipeline.spark.session import get_spark

                self.on_phase("starting Spark")
                log.info("starting the Spark session")
                self._spark = warm(get_spark())
            return self._spark

    def warm_in_background(self) -> threading.Thread:
        t = threading.Thread(target=self._warm_quietly, name="spark-warm", daemon=True)
        t.start()
        return t

    def _warm_quietly(self) -> None:
        try:
            self.spark()
        except Exception as exc:  # the session is made again when something needs it
            log.warning("could not start the Spark session in the background: %s", exc)

    def close(self) -> None:
        if self.replicating is not None:
            self.replicating.stop()
            self.replicating = None
        for w in self.works.values():
            runners.release(w.lock)
        self.works.clear()
        self._conn.close()

    # -- reading what changed ----------------------------------------------------------------
    def _look(self) -> tuple[tuple[int, int], tuple[int, int]]:
        row = self._conn.execute(
            "SELECT (SELECT value FROM _meta WHERE key = 'catalog_version'), wall, logical FROM _clock"
        ).fetchone()
        versions = (feeds_version(self._conn), int(row[0] or 0))
        return versions, (int(row[1]), int(row[2]))

    def reload(self) -> None:
        """Start delivering new active feeds, stop the ones no longer active (between batches)."""
        feeds = [f for f in all_feeds(self._conn)]
        self.jobs = {fid: j for j in J.all_jobs(self._conn) for fid in j.feed_ids}
        # (the store's connections are this process's, shared with a node's endpoints: kept open)
        store = TopicStore(self.db)
        for fr in feeds:
            store.ensure_topic(fr.spec.topic, fr.spec.partitions, fr.spec.retention_ns)
        total = {fid for j in self.jobs.values() if total_order.is_total(j) for fid in j.feed_ids}
        self.total_orders = bool(total)
        live = {
            fr.spec.id: fr
            for fr in feeds
            if fr.spec.id not in total  # ordering = 'total': delivered by total_order.deliver_all
            and (
                fr.state == "scanning"
                or (fr.state in ACTIVE_STATES and crdb_jobs.streams(self.jobs.get(fr.spec.id)))
            )
        }
        for fid in [i for i in self.works if i not in live]:
            w = self.works.pop(fid)
            runners.release(w.lock)
            self.metrics.feed_running(w.label, False)
            log.info("feed %s: stopped (%s)", w.label, self._state_of(feeds, fid))
        for fid, fr in live.items():
            got = self.works.get(fid)
            j = self.jobs.get(fid)
            if got is None:
                lock = runners.try_feed_lock(self.db, fid)
                if lock is None:  # another process delivers it (see ``blocked``)
                    self.blocked.add(fid)
                    continue
                self.blocked.discard(fid)
                label = job_label(j.id) if j is not None else feed_label(fr.spec.topic)
                self.works[fid] = FeedWork(fr.spec, fr.state, j, label, lock=lock)
                self.metrics.feed_running(label, True)
                log.info("feed %s: started (%s)", label, fr.state)
            else:
                got.state, got.job, got.spec = fr.state, j, fr.spec

    @staticmethod
    def _state_of(feeds: list[Any], fid: int) -> str:
        return next((fr.state for fr in feeds if fr.spec.id == fid), "dropped")

    def _columns(self, f: FeedSpec) -> tuple[int, ...]:
        from changefeed.pipeline.sources.journal import load_table

        try:
            return tuple(c.id for c in load_table(self.db, f.table_id).stored)
        except ChangefeedError:
            return ()

    def _context(self, w: FeedWork) -> FeedContext:
        """The feed's delivery context, made again when its table's columns changed."""
        from changefeed.pipeline.snapshot import backfill
        from changefeed.pipeline.sources.journal import stream_reader

        cols = self._columns(w.spec)
        if w.ctx is None or cols != w.columns:
            ctx, options = job.feed_context(
                self.db,
                w.spec,
                max_rows=self.max_rows,
                end=None if w.job is None else w.job.end,
                crdb_job=w.job,
                # every feed: a micro-batch holding a schema change is encoded in each side's
                # schema (YDB feeds too: their messages before a DROP COLUMN keep the column)
                schema_changes=backfill.SchemaChanges(),
                metrics=self.metrics,
                label=w.label,
            )
            w.ctx, w.options, w.columns = ctx, options, cols
            w.reader = stream_reader(options)
            w.idle_target = False
            w.planned = offset_log.latest(ctx.checkpoint, "offsets")
            w.committed = offset_log.latest(ctx.checkpoint, "commits")
        return w.ctx

    # -- delivering --------------------------------------------------------------------------
    def _next_batch(self, w: FeedWork, until_idle: bool) -> int | None:
        """Plan (or find already planned) the feed's next micro-batch; its id, or None when
        there is nothing to deliver."""
        from pyspark.sql.streaming.datasource import ReadMaxRows

        ctx = self._context(w)
        ckpt = ctx.checkpoint
        last, done = w.planned, w.committed
        if last is not None and (done is None or done < last):
            return last  # planned and not delivered (a crash, or left for Spark): the same offsets
        reader = w.reader
        assert reader is not None
        if until_idle and not w.idle_target:
            reader.prepareForTriggerAvailableNow()
            w.idle_target = True
        if last is None:
            start: dict[str, Any] = reader.initialOffset()
        else:
            got = offset_log.read(ckpt, last)
            if got is None:
                raise PipelineError(
                    f"feed {w.spec.id} ({w.spec.topic}): the offset log {ckpt / 'offsets' / str(last)} is "
                    f"unreadable; delete {ckpt}: the feed then resumes from its last recorded progress "
                    "(the last micro-batch may be delivered twice; nothing is lost)"
                )
            start = got[1]
        end = reader.latestOffset(start, ReadMaxRows(self.max_rows))
        close_ns = int(w.options.get("resolved_ns", 0) or 0)
        closed = end.get("closed") or start.get("closed")
        w.next_close_ns = int(closed[0]) + close_ns if close_ns and closed else 0
        if end == start or (end.get("seq") == start.get("seq") and not end.get("new")):
            return None
        n = 0 if last is None else last + 1
        offset_log.write_offsets(ckpt, n, end)
        w.planned = n
        return n

    def _deliver(self, w: FeedWork, until_idle: bool) -> bool:
        """Deliver the feed's next micro-batch; False when there was none."""
        if w.state == "scanning":
            self._scan(w)
            return True
        n = self._next_batch(w, until_idle)
        if n is None:
            return False
        ctx = w.ctx
        assert ctx is not None
        if not ctx.driver_can_deliver(n):
            raise NeedsSpark()
        ctx.deliver(None, n)
        offset_log.write_commit(ctx.checkpoint, n)
        w.committed = n
        offset_log.purge(ctx.checkpoint, n)
        if ctx.stopped:  # schema_change_policy='stop': its job failed at this batch
            self.works.pop(w.spec.id, None)
        return True

    def _spark_catch_up(self, w: FeedWork, until_idle: bool) -> None:
        """Run the feed's Spark query ``availableNow``: the planned batch, then the backlog."""
        ctx = self._context(w)
        self.on_phase(f"{w.label}: catching up on Spark")
        log.info("feed %s: a large backlog or a schema change: delivering it on Spark", w.label)
        spark = self.spark()
        q = job.start_feed_query(
            spark, self.db, w.spec, available_now=True, context=(ctx, w.options), max_rows=self.max_rows
        )
        while q.isActive and not self._stop.is_set():
            q.awaitTermination(1)
        if q.isActive:  # stopping: after the micro-batch in flight (its batch is replayed later)
            job.stop_between_batches(q)
            return
        job.await_query(q, w.spec, ctx.checkpoint)
        # the query's reader advanced past the driver's; plan from the checkpoint again
        w.planned = offset_log.latest(ctx.checkpoint, "offsets")
        w.committed = offset_log.latest(ctx.checkpoint, "commits")
        w.caught_up = False
        w.idle_target = False
        if until_idle and w.reader is not None:
            w.reader.prepareForTriggerAvailableNow()
            w.idle_target = True

    def _scan(self, w: FeedWork) -> None:
        from changefeed.pipeline.snapshot.chunks import CHUNK_ROWS
        from changefeed.pipeline.snapshot.scan import DRIVER_SCAN_ROWS, run_initial_scan, scan_rows

        self.on_phase(f"{w.label}: initial scan")
        rows = scan_rows(self.db, w.spec)
        on_driver = 0 < DRIVER_SCAN_ROWS >= rows
        log.info("feed %s: initial scan of %d rows%s", w.label, rows, " (on the driver)" if on_driver else "")

        def progressed(feed: FeedSpec, scanned: int, total: int) -> None:
            self.metrics.backfill(w.label, -(-(total - scanned) // max(1, CHUNK_ROWS)))
            if self.on_progress is not None:
                self.on_progress(feed, scanned, total)

        before = self._topic_records(w.spec.topic)
        run_initial_scan(None if on_driver else self.spark(), self.db, w.spec, on_progress=progressed)
        # the scan's records count as emitted (CockroachDB counts its backfill's messages; commit
        # latency leaves them out): what the topic gained (a sink's scan is not counted)
        after = self._topic_records(w.spec.topic)
        if after > before:
            self.metrics.emitted(w.label, after - before, 0, None, 0)
        self.metrics.backfill(w.label, 0)
        w.state = "running"
        log.info("feed %s: initial scan done", w.label)
        if not crdb_jobs.streams(w.job):  # initial_scan='only': advance() finishes its job
            self.works.pop(w.spec.id, None)

    def _topic_records(self, topic: str) -> int:
        """Records in ``topic`` of the embedded topics (0 when it is not one of theirs)."""
        try:
            return sum(end for _, end in TopicStore(self.db).offsets(topic).values())
        except ChangefeedError:
            return 0

    def _failed(self, w: FeedWork, exc: BaseException) -> None:
        """A feed's failure. A sink's retryable error (``retryable changefeed error:``, a Kafka
        broker down or unreachable) is retried without giving up, as CockroachDB retries a job's
        retryable errors; a sink's refusal that retrying cannot fix (authorization, message too
        large, unknown topic) fails the job at once, or pauses it (``on_error``); anything else
        fails a job after ``JOB_RETRIES`` attempts in a row. Retries wait with backoff."""
        message = (
            str(exc)
            if isinstance(exc, ChangefeedError)
            else job.failure_message(exc, w.spec, checkpoint_dir(self.db, w.spec.id))
        )
        w.failures += 1
        w.ctx = None  # made again (and its sink reopened) at the retry
        retryable = RETRYABLE in message
        terminal = w.job is not None and not retryable and TERMINAL_SINK in message
        if w.job is not None and (terminal or (not retryable and w.failures >= JOB_RETRIES)):
            crdb_jobs.record_failure(self.db, w.spec.id, message)  # on_error: fail or pause
            self.metrics.failed(w.label)
            self.works.pop(w.spec.id, None)
            log.error("feed %s: failed: %s", w.label, message)
            return
        self.metrics.retried(w.label)
        wait = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (w.failures - 1))
        w.retry_at = time.monotonic() + wait
        if w.failures == 1 or w.failures & (w.failures - 1) == 0:  # 1, 2, 4, 8 ..: rate-limited
            of = f" of {JOB_RETRIES}" if w.job is not None and not retryable else ""
            log.warning(
                "feed %s: retryable error, retrying (%d%s) in %.0f s: %s",
                w.label,
                w.failures,
                of,
                wait,
                message,
            )
        self._note(w, f"retryable error: {message}", message)

    def _note(self, w: FeedWork, running_status: str | None, error: str | None) -> None:
        from changefeed.engine.database import Database

        try:
            database = Database(self.db, create=False)
            try:
                with database.lock:
                    database.conn.execute("BEGIN IMMEDIATE")
                    try:
                        set_running_status(database.conn, w.spec.id, running_status, error, time.time_ns())
                        database.conn.execute("COMMIT")
                    except BaseException:
                        database.conn.execute("ROLLBACK")
                        raise
            finally:
                database.close()
        except ChangefeedError as exc:
            log.debug("could not record the status of feed %s: %s", w.label, exc)

    def _round(self, until_idle: bool, stop: threading.Event, changed: bool) -> bool:
        """One pass over the feeds; True when some feed delivered something. ``changed``: some
        transaction committed since the last round (else only feeds due to close a timestamp,
        scanning or planned and not delivered are looked at)."""
        busy = False
        if self.total_orders and (changed or until_idle) and not stop.is_set():
            try:
                busy = total_order.deliver_all(self.db) > 0
            except DatabaseError:
                raise
            except ChangefeedError as exc:
                if until_idle:
                    self.errors.append(exc)
                else:
                    log.warning("ordering = 'total' delivery failed, retrying next round: %s", exc)
        now = time.monotonic()
        wall = time.time_ns()
        # initial scans first: a job's resolved timestamps are job-wide, and must not reach the
        # topic of a feed whose snapshot is not there yet
        for w in sorted(self.works.values(), key=lambda w: w.state != "scanning"):
            if stop.is_set():
                break
            if w.done or w.retry_at > now:
                continue
            pending = w.planned is not None and (w.committed is None or w.committed < w.planned)
            due = bool(w.next_close_ns) and wall >= w.next_close_ns
            if not (changed or until_idle or pending or due or w.ctx is None or w.state == "scanning"):
                continue
            try:
                got = 0
                while got < BATCHES_PER_ROUND and not stop.is_set() and w.spec.id in self.works:
                    scanning = w.state == "scanning"
                    try:
                        if not self._deliver(w, until_idle):
                            break
                    except NeedsSpark:
                        self._spark_catch_up(w, until_idle)
                    got += 1
                    if scanning:
                        break  # every feed's scan before any feed streams (job-wide resolved)
                if got:
                    busy = True
                    w.delivered += got
                    if got >= BATCHES_PER_ROUND:
                        w.caught_up = False  # a backlog: say when it is delivered
                elif not w.caught_up:
                    w.caught_up = True
                    log.info("feed %s: caught up (%d micro-batches delivered)", w.label, w.delivered)
                if until_idle and not got:
                    w.done = True
                if w.failures:
                    w.failures = 0
                    self._note(w, None, None)
            except DatabaseError:
                raise
            except ChangefeedError as exc:
                if until_idle and w.job is None:
                    self.errors.append(exc)
                    w.done = True
                    continue
                self._failed(w, exc)
            except Exception as exc:  # a Spark or sink failure: this feed's, not the runner's
                if until_idle and w.job is None:
                    self.errors.append(
                        PipelineError(job.failure_message(exc, w.spec, checkpoint_dir(self.db, w.spec.id)))
                    )
                    w.done = True
                    continue
                self._failed(w, exc)
        return busy

    def _lock_free(self, fid: int) -> bool:
        """Whether the lock of a feed another process delivered is free now."""
        fd = runners.try_feed_lock(self.db, fid)
        runners.release(fd)
        return fd is not None

    def _replicate(self) -> None:
        """One tick of this database's asynchronous replications (it is their destination): their
        apply queries, and their local sources' feeds. Spark starts only once there is one."""
        if self.replicating is None:
            if not R.all_replications(self._conn):
                return
            self.replicating = ReplicationRunner(self.db, self.on_progress)
        try:
            self.replicating.tick(self.spark())
        except DatabaseError:
            raise
        except Exception as exc:  # a replication's failure is its own (recorded by tick), never the runner's
            log.warning("asynchronous replications of %s: %s", self.db, exc)

    # -- the loop ----------------------------------------------------------------------------
    def run(
        self,
        stop: threading.Event | None = None,
        *,
        until_idle: bool = False,
        on_ready: Callable[[], None] | None = None,
        gc: bool = True,
    ) -> None:
        """Deliver until ``stop`` is set (``until_idle``: until everything committed before the
        call is delivered). Raises the first feed error of an ``until_idle`` run."""
        stop = stop or threading.Event()
        self._stop = stop
        last_advance = last_retention = last_gc = last_blocked = time.monotonic()
        last_replication = 0.0
        seen = self.signal.count
        ready = False
        self.on_phase("delivering")
        while not stop.is_set():
            versions, clock = self._look()
            moved = versions != self._versions
            if moved:
                self.reload()
                self._versions = versions
            if not ready:
                ready = True
                if on_ready is not None:
                    on_ready()
            changed = clock != self._clock
            self._clock = clock
            busy = self._round(until_idle, stop, changed)
            now = time.monotonic()
            if not until_idle and (moved or now - last_replication >= REPLICATION_TICK_S):
                self._replicate()
                last_replication = now
            if self.blocked and now - last_blocked >= BLOCKED_RETRY_S:
                last_blocked = now
                if any(self._lock_free(fid) for fid in self.blocked):
                    self.reload()  # only then: a reload reads every feed and ensures its topic
            if moved or now - last_advance >= ADVANCE_S or (until_idle and not busy):
                crdb_jobs.advance(self.db, running_feeds=self.works.keys())
                last_advance = now
            if until_idle and all(w.done for w in self.works.values()):
                break
            if now - last_retention >= RETENTION_EVERY_S:
                TopicStore(self.db).apply_retention()
                last_retention = now
            if now - last_gc >= GC_EVERY_S and gc:
                collect_garbage(self.db)
                last_gc = now
            if not busy:
                seen = self.signal.wait(seen, POLL_S if not until_idle else 0.0)
        if until_idle:
            job_resolved.flush(self.db)  # multi-feed jobs: their frontier once every feed caught up
            crdb_jobs.advance(self.db)
            if R.all_replications(self._conn):  # issue 20: local sources' feeds, then the applies
                failures = ReplicationRunner(self.db, self.on_progress).run_until_idle(self.spark())
                self.errors += [PipelineError(e) for e in failures]
            if self.errors:
                raise self.errors[0]
            if gc:
                collect_garbage(self.db)
        for w in self.works.values():
            self.metrics.feed_running(w.label, False)


def run_node(
    db: Path, *, stop: threading.Event, metrics: PipelineMetrics, on_ready: Callable[[], None]
) -> None:
    """A node's pipeline: deliver every feed of ``db`` continuously until ``stop`` is set (the
    node holds the database's runner lock). The Spark session warms in the background."""
    runner = Runner(db, metrics=metrics)
    try:
        runner.warm_in_background()
        runner.run(stop, on_ready=on_ready)
    finally:
        runner.close()


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
    :class:`Runner` to idle, holding the database's runner lock.
    A Spark session is made only if some feed needs one (``spark``: use this one)."""
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
    :class:`Runner` a node runs. ``claim_lock``: take the
    database's runner lock (False: the caller, a node, holds it)."""
    dbp = check_db(db)
    stop = stop or threading.Event()
    signals: contextlib.AbstractContextManager[None] = (
        stop_on_signals(stop.set) if install_signals else contextlib.nullcontext()
    )
    with signals, runners.claim(dbp, "run") if claim_lock else contextlib.nullcontext():
        r = Runner(
            dbp, spark=spark, max_rows=max_rows, metrics=metrics, on_progress=on_progress, on_phase=on_phase
        )
        try:
            if warm_spark and spark is None:
                r.warm_in_background()
            r.run(stop, on_ready=on_ready)
        finally:
            r.close()
