"""Job-wide resolved timestamps of a CockroachDB changefeed job with several feeds.

CockroachDB's resolved guarantee spans the whole changefeed: ``{"resolved": T}`` promises that
every row change at or below ``T`` of *every* target has been emitted, so the job's frontier is
the minimum over all its spans. A job here is one feed per target (table, or column family), each
its own streaming query with its own pace; a feed alone may only speak for its own table. So:

* a job with one feed keeps the feed's own resolved messages (written in the same append as the
  micro-batch's data, deterministic on replay: ``job.py``);
* a job with several feeds: each feed still closes timestamps (its journal source) and records
  its progress, but writes no resolved message itself. After each of its feeds' micro-batches,
  :meth:`JobResolved.advance` takes the job's frontier, the minimum over its live feeds of what
  they durably delivered (``_progress``, written only after a batch's appends), and when it passed
  the last one emitted (and ``resolved``'s interval has elapsed), appends ``{"resolved": T}`` to
  every partition of every topic of the job. The same minimum is the job's ``high_water``
  (``crdb_jobs.advance``).

The appends use writer ``job-<id>-resolved`` with batch id = ``T``'s wall time: idempotent and
monotonic per partition (a topic partition ignores a batch id at or below its writer's last), so
concurrent feeds, replays and restarts never emit a resolved timestamp twice or out of order.
Data at or below ``T`` is already in its partition (its feed's progress says so), and data a feed
appends afterwards is above ``T`` (it is past that feed's delivered position), so a resolved
message never precedes data it covers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from changefeed.engine.clock import CommitTs
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.feeds import jobs as J
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.store import all_feeds
from changefeed.topics.store import TopicStore

if TYPE_CHECKING:
    from changefeed.formats.base import Encoder
    from changefeed.pipeline.sinks import SinkWriter

#: Feed states whose progress holds the job's frontier back (canceled feeds are ALTER-dropped).
FRONTIER_STATES = ("running", "scanning", "paused", "done")


def writer_of(job_id: int) -> str:
    return f"job-{job_id}-resolved"


def job_frontier(db: Path, job_id: int) -> tuple[CommitTs | None, list[FeedSpec]]:
    """(the job's frontier, its live feeds): the minimum over the job's live feeds of the commit
    time each has durably delivered (its creation point while it has no progress), never below
    the job's start; None for a job that no longer exists or has no live feed."""
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        job = J.get_job(conn, job_id)
        if job is None:
            return None, []
        ids = set(job.feed_ids)
        feeds = [f.spec for f in all_feeds(conn) if f.spec.id in ids and f.state in FRONTIER_STATES]
        if not feeds:
            return None, []
        marks: list[CommitTs] = []
        for f in feeds:
            row = conn.execute("SELECT wall, logical FROM _progress WHERE feed_id = ?", (f.id,)).fetchone()
            mark = (
                CommitTs(f.created_wall, f.created_logical)
                if row is None
                else CommitTs(int(row[0]), int(row[1]))
            )
            marks.append(max(mark, job.start))
        frontier = min(marks)
        if job.end is not None and frontier > job.end:
            frontier = job.end
        return frontier, feeds
    finally:
        conn.close()


@dataclass
class JobResolved:
    """The resolved messages of one job with several feeds (one per job and process)."""

    db: Path
    job_id: int
    encoder: Encoder
    store: TopicStore | SinkWriter
    interval_ns: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    last: int | None = None  # wall of the last resolved timestamp emitted (None: read the topics)
    last_emit: float = 0.0  # time.monotonic() of the last emission

    def advance(self, *, force: bool = False) -> CommitTs | None:
        """Emit the job's frontier if it passed the last one emitted and the interval elapsed
        (``force``: whatever the interval); returns the timestamp emitted, or None."""
        with self.lock:
            frontier, feeds = job_frontier(self.db, self.job_id)
            if frontier is None:
                return None
            topics = {f.topic: f for f in feeds}
            if self.last is None:
                self.last = self._last_emitted(topics.values())
            if self.last is not None and frontier.wall <= self.last:
                return None
            now = time.monotonic()
            if not force and self.last is not None and (now - self.last_emit) * 1e9 < self.interval_ns:
                return None
            writer = writer_of(self.job_id)
            for topic, f in topics.items():
                payload = self.encoder.resolved(frontier, 0, f)
                if isinstance(self.store, TopicStore):
                    rec = pa.table(
                        {"key": pa.array([None], pa.binary()), "value": [payload], "ts": [frontier.wall]}
                    )
                    for p in range(f.partitions):
                        self.store.append(topic, p, writer, frontier.wall, rec)
                else:
                    self.store.emit_resolved(topic, writer, frontier.wall, payload, frontier)
            self.last = frontier.wall
            self.last_emit = now
            return frontier

    def _last_emitted(self, feeds: Iterable[FeedSpec]) -> int | None:
        if not isinstance(self.store, TopicStore):
            return None
        marks = []
        for f in feeds:
            b = self.store.committed_batch(f.topic, 0, writer_of(self.job_id))
            if b is not None:
                marks.append(b)
        return min(marks) if marks else None


_registry: dict[tuple[str, int], JobResolved] = {}
_registry_lock = threading.Lock()


def for_job(
    db: Path, job: J.Job, feed: FeedSpec, encoder: Encoder, store: TopicStore | SinkWriter
) -> JobResolved | None:
    """The shared job-wide resolved emitter of ``feed``'s job, or None when the feed speaks for
    the whole job itself (a one-feed job) or the job asked for no resolved messages."""
    if len(job.feed_ids) < 2 or not feed.resolved_ns:
        return None
    key = (str(db.absolute()), job.id)
    with _registry_lock:
        emitter = _registry.get(key)
        if emitter is None:
            emitter = JobResolved(db.absolute(), job.id, encoder, store, int(feed.resolved_ns))
            _registry[key] = emitter
        return emitter


def flush(db: Path) -> None:
    """Emit every multi-feed job's current frontier now (the end of ``run --until-idle``)."""
    with _registry_lock:
        emitters = [e for (path, _), e in _registry.items() if path == str(db.absolute())]
    for e in emitters:
        e.advance(force=True)


__all__ = ["FRONTIER_STATES", "JobResolved", "flush", "for_job", "job_frontier", "writer_of"]
