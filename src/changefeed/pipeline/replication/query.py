"""The Spark streaming query that applies one asynchronous replication (issue 20).

``format("changefeed-replication")`` reads every source topic partition of the replication from
where the destination recorded it stands (``pipeline/sources/replication.py``); ``foreachBatch``
hands each micro-batch to :class:`~changefeed.pipeline.replication.apply.Applier`, one destination
transaction per batch (its records read on the driver from the batch's offsets: :data:`READ`). The positions live in the destination database, so the
checkpoint only carries the batch in flight: it is emptied when the query starts, and a
``kill -9`` anywhere (reading, applying, committing, checkpointing) ends with every change
applied once.

Errors: a :class:`~changefeed.exceptions.ReplicationError` (a record that does not decode as its
replica's types, changes lost to the source's retention, a replica gone) stops the replication in
state ``Error`` with the error's text, as YDB's critical errors do; anything else (the source node
unreachable, a network error) is retried at the runner's next poll, its text shown meanwhile.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from changefeed.engine.database import Database
from changefeed.feeds import replication as R
from changefeed.pipeline.delivery.progress import batch_end_offset
from changefeed.pipeline.replication.apply import Applier, apply_arrow
from changefeed.pipeline.sources.replication import SourceTopics, open_topics, read_partition, replication_key

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

#: How often a running replication's query looks for new records (Spark processing-time trigger).
TRIGGER = "100 milliseconds"
MAX_RECORDS = 500_000


def checkpoint(db: Path, rid: int) -> Path:
    return db / "checkpoints" / R.checkpoint_name(rid)


#: Where a micro-batch's records are read: ``driver`` (default) reads them in ``foreachBatch`` from
#: the source topics, from what the destination applied to the batch's end offset (the query's
#: offset log), with no Spark job; ``spark`` evaluates the micro-batch's DataFrame (the source's
#: partitions read on the executors, collected as Arrow). Same records, same checks.
READ = os.environ.get("CHANGEFEED_REPLICATION_READ", "driver")


class ApplyBatches:
    """``foreachBatch`` of one replication: apply each micro-batch on the driver.

    The apply runs on the driver in one destination transaction, so reading the records there
    too (``READ = "driver"``) saves the Spark job that would read them on executors only to
    collect them back: planning it, the records' trip through the JVM (Arrow -> rows -> Arrow)."""

    def __init__(self, db: Path, rid: int, checkpoint: Path, read: str = READ) -> None:
        self.db = Database(db, create=False)
        self.path, self.rid, self.checkpoint, self.read = db, rid, checkpoint, read
        self.applier = Applier(self.db, rid)
        self.batches = 0
        self.last_ns = 0
        self._topics: SourceTopics | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if self.read == "spark":
            apply_arrow(self.applier, df.toArrow())
        else:
            self.apply_on_driver(batch_end_offset(self.checkpoint, batch_id))
        self.batches += 1
        self.last_ns = time.time_ns()

    def apply_on_driver(self, end: dict[str, Any]) -> None:
        rep = R.get(self.db.conn, self.rid)
        if rep is None or rep.state != R.RUNNING:
            return  # the Applier would change nothing either; the records are read again later
        pos = R.positions(self.db.conn, self.rid)
        if self._topics is None:
            self._topics = open_topics(self.path, rep)
        items: list[int] = []
        parts: list[int] = []
        offsets: list[int] = []
        tss: list[int] = []
        values: list[bytes] = []
        for it in rep.items:
            for p in range(it.partitions):
                at = pos[(it.item_id, p)].next_offset if (it.item_id, p) in pos else 0
                stop = int(end.get(replication_key(it.item_id, p), at))
                if stop <= at:
                    continue
                for offs, ts, vals in read_partition(self._topics, rep.name, it.topic, p, at, stop):
                    n = len(offs)
                    items += [it.item_id] * n
                    parts += [p] * n
                    offsets += offs
                    tss += ts
                    values += vals
        if offsets:
            self.applier.apply_columns(items, parts, offsets, tss, values)

    def close(self) -> None:
        if self._topics is not None:
            self._topics.close()
            self._topics = None
        self.db.close()


def start_replication_query(
    spark: SparkSession,
    db: Path,
    rid: int,
    *,
    available_now: bool,
    trigger: str = TRIGGER,
    max_records: int = MAX_RECORDS,
) -> tuple[StreamingQuery, ApplyBatches]:
    ck = checkpoint(db, rid)
    shutil.rmtree(ck, ignore_errors=True)  # positions live in the destination (see the docstring)
    ck.parent.mkdir(parents=True, exist_ok=True)
    sink = ApplyBatches(db, rid, ck)
    df = (
        spark.readStream.format("changefeed-replication")
        .option("replication", str(rid))
        .option("maxRecordsPerTrigger", str(max_records))
        .load(str(db))
    )
    writer = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(ck))
        .queryName(f"replication-{rid}")
    )
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=trigger)
    return writer.start(), sink


_CAUSE = re.compile(r"ReplicationError: ([^\n]+)")


def critical_cause(exc: BaseException) -> str | None:
    """The ReplicationError text inside a failed query's exception (None: not a critical error)."""
    m = _CAUSE.search(str(exc))
    if m is not None:
        return m.group(1).strip()
    from changefeed.exceptions import ReplicationError

    return str(exc) if isinstance(exc, ReplicationError) else None


def short_cause(exc: BaseException) -> str:
    text = str(exc)
    m = re.findall(r"(?:Error|Exception): ([^\n]+)", text)
    line = m[-1] if m else (text.strip().splitlines() or [type(exc).__name__])[0]
    return line.encode("ascii", "backslashreplace").decode()[:300]


__all__ = ["READ", "ApplyBatches", "checkpoint", "critical_cause", "short_cause", "start_replication_query"]
