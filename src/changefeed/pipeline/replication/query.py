"""The Spark streaming query that applies one asynchronous replication (issue 20).

``format("changefeed-replication")`` reads every source topic partition of the replication from
where the destination recorded it stands (``pipeline/sources/replication.py``); ``foreachBatch``
hands each micro-batch, as Arrow, to :class:`~changefeed.pipeline.replication.apply.Applier`, one
destination transaction per batch. The positions live in the destination database, so the
checkpoint only carries the batch in flight: it is emptied when the query starts, and a
``kill -9`` anywhere (reading, applying, committing, checkpointing) ends with every change
applied once.

Errors: a :class:`~changefeed.exceptions.ReplicationError` (a record that does not decode as its
replica's types, changes lost to the source's retention, a replica gone) stops the replication in
state ``Error`` with the error's text, as YDB's critical errors do; anything else (the source node
unreachable, a network error) is retried at the runner's next poll, its text shown meanwhile.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from changefeed.engine.database import Database
from changefeed.feeds import replication as R
from changefeed.pipeline.replication.apply import Applier, records_from_arrow

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

#: How often a running replication's query looks for new records (Spark processing-time trigger).
TRIGGER = "100 milliseconds"
MAX_RECORDS = 500_000


def checkpoint(db: Path, rid: int) -> Path:
    return db / "checkpoints" / R.checkpoint_name(rid)


class ApplyBatches:
    """``foreachBatch`` of one replication: apply each micro-batch on the driver."""

    def __init__(self, db: Path, rid: int) -> None:
        self.db = Database(db, create=False)
        self.applier = Applier(self.db, rid)
        self.batches = 0
        self.last_ns = 0

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        table = df.toArrow()
        self.applier.apply(records_from_arrow(table))
        self.batches += 1
        self.last_ns = time.time_ns()

    def close(self) -> None:
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
    sink = ApplyBatches(db, rid)
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


__all__ = ["ApplyBatches", "checkpoint", "critical_cause", "short_cause", "start_replication_query"]
