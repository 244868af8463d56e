"""Running a destination's asynchronous replications inside ``changefeed run`` (issue 20).

Each poll of the runner (:meth:`ReplicationRunner.tick`):

* every ``Running`` replication has its apply query (``query.py``); a paused, done, failed or
  dropped one has none (stopped between micro-batches);
* a query that failed on a :class:`~changefeed.exceptions.ReplicationError` puts its replication
  in ``Error`` with the text; any other failure (the source node unreachable...) is retried at a
  later poll, its text in the replication's ``error`` meanwhile;
* a source on this machine (``file://``) gets its replication changefeeds delivered here too
  (initial scan, then their streaming queries, journal GC and topic retention), unless another
  runner — the source's own ``changefeed run`` or node — already runs them: each feed's query is
  guarded by an exclusive lock (``feeds.runners.try_feed_lock``). A source node on another machine
  delivers its own.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from changefeed.engine.database import DB_FILE, Database, open_sqlite
from changefeed.exceptions import ChangefeedError
from changefeed.feeds import replication as R, runners
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.store import all_feeds
from changefeed.pipeline.delivery.progress import ACTIVE_STATES, checkpoint_dir
from changefeed.pipeline.replication.query import (
    ApplyBatches,
    critical_cause,
    short_cause,
    start_replication_query,
)
from changefeed.pipeline.snapshot import backfill
from changefeed.pipeline.stream import query as feed_query
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

#: Seconds before a replication whose query failed on a transient error is started again.
RETRY_S = 5.0
#: How often the journal GC and topic retention run on a local source this runner feeds.
SOURCE_UPKEEP_S = 60.0

ScanProgress = Callable[[FeedSpec, int, int], None]


@dataclass
class _Apply:
    query: StreamingQuery
    sink: ApplyBatches


@dataclass
class _SourceFeed:
    feed: FeedSpec
    query: StreamingQuery | None
    lock: int


def replications(db: Path) -> list[R.Replication]:
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        return R.all_replications(conn)
    finally:
        conn.close()


def _set_state(db: Path, rid: int, state: str | None, error: str | None) -> None:
    """Record a failure: ``state`` (None keeps it) and the error text, if the replication still runs."""
    database = Database(db, create=False)
    try:
        with database.lock:
            conn = database.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                rep = R.get(conn, rid)
                if rep is not None and rep.state == R.RUNNING:
                    R.set_state(conn, rid, state or rep.state, time.time_ns(), error)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    finally:
        database.close()


def _source_feed(src: Path, table_id: int, name: str) -> tuple[FeedSpec, str] | None:
    try:
        conn = open_sqlite(src / DB_FILE, readonly=True)
    except ChangefeedError:
        return None
    try:
        for f in all_feeds(conn):
            if f.spec.table_id == table_id and f.spec.name == name:
                return f.spec, f.state
    finally:
        conn.close()
    return None


class ReplicationRunner:
    """The replications of one destination database, driven by the runner's poll loop."""

    def __init__(self, db: Path, on_progress: ScanProgress | None = None) -> None:
        self.db = db
        self.on_progress = on_progress
        self.applies: dict[int, _Apply] = {}
        self.sources: dict[tuple[str, int], _SourceFeed] = {}
        self.retry_at: dict[int, float] = {}
        self.upkeep: dict[str, float] = {}

    # ------------------------------------------------------------------ local sources
    def _wanted_sources(self, reps: list[R.Replication]) -> dict[tuple[str, int], FeedSpec]:
        wanted: dict[tuple[str, int], FeedSpec] = {}
        for rep in reps:
            path = rep.spec.endpoint.path
            if rep.state != R.RUNNING or path is None or Path(path).absolute() == self.db:
                continue  # a remote source delivers its own feeds; the destination's own runner its
            for item in rep.items:
                found = _source_feed(Path(path), item.source_table_id, item.changefeed)
                if found is not None and found[1] in ACTIVE_STATES:
                    wanted[(path, found[0].id)] = found[0]
        return wanted

    def _run_source_feed(
        self, spark: SparkSession, path: str, f: FeedSpec, *, available_now: bool
    ) -> _SourceFeed | None:
        src = Path(path)
        lock = runners.try_feed_lock(src, f.id)
        if lock is None:
            return None  # the source's own runner has it
        try:
            TopicStore(src).ensure_topic(f.topic, f.partitions, f.retention_ns)
            found = _source_feed(src, f.table_id, f.name)
            if found is not None and found[1] == "scanning":
                from changefeed.pipeline.snapshot.scan import run_initial_scan

                run_initial_scan(spark, src, f, on_progress=self.on_progress)
            q = feed_query.start_feed_query(
                spark, src, f, available_now=available_now, schema_changes=backfill.SchemaChanges()
            )
        except BaseException:
            runners.release(lock)
            raise
        return _SourceFeed(f, q, lock)

    def _sync_sources(self, spark: SparkSession, reps: list[R.Replication]) -> None:
        wanted = self._wanted_sources(reps)
        for key in [k for k in self.sources if k not in wanted]:
            self._stop_source(key)
        for key, sf in list(self.sources.items()):
            if sf.query is not None and not sf.query.isActive:
                exc = sf.query.exception()
                if exc is not None:
                    log.warning(
                        "source feed %s of %s failed: %s; restarting", sf.feed.topic, key[0], short_cause(exc)
                    )
                self._stop_source(key)
        for key, f in wanted.items():
            if key in self.sources:
                continue
            try:
                started = self._run_source_feed(spark, key[0], f, available_now=False)
            except ChangefeedError as exc:
                log.warning("source feed %s of %s: %s", f.topic, key[0], exc)
                continue
            if started is not None:
                self.sources[key] = started
        now = time.monotonic()
        for path in {k[0] for k in self.sources}:
            if now - self.upkeep.get(path, 0.0) >= SOURCE_UPKEEP_S:
                self.upkeep[path] = now
                _source_upkeep(Path(path))

    def _stop_source(self, key: tuple[str, int]) -> None:
        sf = self.sources.pop(key)
        if sf.query is not None:
            feed_query.stop_between_batches(sf.query)
        runners.release(sf.lock)

    # ------------------------------------------------------------------ applies
    def _stop_apply(self, rid: int) -> None:
        run = self.applies.pop(rid)
        feed_query.stop_between_batches(run.query)
        run.sink.close()

    def _finished(self, rid: int, run: _Apply) -> None:
        exc = run.query.exception()
        run.sink.close()
        if exc is None:
            return
        cause = critical_cause(exc)
        if cause is not None:
            log.error("asynchronous replication %d stopped: %s", rid, cause)
            _set_state(self.db, rid, R.ERROR, cause)
        else:
            text = short_cause(exc)
            log.warning("asynchronous replication %d: %s; retrying in %.0f s", rid, text, RETRY_S)
            _set_state(self.db, rid, None, text)
            self.retry_at[rid] = time.monotonic() + RETRY_S

    def tick(self, spark: SparkSession) -> None:
        reps = replications(self.db)
        running = {r.id: r for r in reps if r.state == R.RUNNING}
        for rid in [i for i in self.applies if i not in running]:
            self._stop_apply(rid)
        for rid, run in list(self.applies.items()):
            if not run.query.isActive:
                self.applies.pop(rid)
                self._finished(rid, run)
        self._sync_sources(spark, reps)
        now = time.monotonic()
        for rid, rep in running.items():
            if rid in self.applies or now < self.retry_at.get(rid, 0.0):
                continue
            if rep.error:
                _set_state(self.db, rid, None, None)  # retrying: the transient error is cleared
            q, sink = start_replication_query(spark, self.db, rid, available_now=False)
            self.applies[rid] = _Apply(q, sink)

    def stop(self) -> None:
        for rid in list(self.applies):
            self._stop_apply(rid)
        for key in list(self.sources):
            self._stop_source(key)

    def run_until_idle(self, spark: SparkSession) -> list[str]:
        """Deliver local sources' replication feeds, then apply every record available now;
        returns the failures (each also recorded on its replication)."""
        reps = replications(self.db)
        errors: list[str] = []
        for (path, _), f in self._wanted_sources(reps).items():
            sf = self._run_source_feed(spark, path, f, available_now=True)
            if sf is None or sf.query is None:
                continue
            try:
                feed_query.await_query(sf.query, f, checkpoint_dir(Path(path), f.id))
            except ChangefeedError as exc:
                errors.append(str(exc))
            finally:
                runners.release(sf.lock)
        for rep in reps:
            if rep.state != R.RUNNING:
                continue
            q, sink = start_replication_query(spark, self.db, rep.id, available_now=True)
            run = _Apply(q, sink)
            with contextlib.suppress(Exception):
                q.awaitTermination()
            failure = q.exception()
            if failure is not None:
                errors.append(f"asynchronous replication {rep.name}: {short_cause(failure)}")
            self._finished(rep.id, run)
        return errors


def _source_upkeep(src: Path) -> None:
    from changefeed.engine.gc import collect_garbage

    try:
        TopicStore(src).apply_retention()
        database = Database(src, create=False)
        try:
            collect_garbage(database)
        finally:
            database.close()
    except Exception as exc:  # best effort, as the runner's own
        log.warning("upkeep of source %s failed: %s", src, exc)


__all__ = ["ReplicationRunner", "replications"]
