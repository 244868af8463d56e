"""Spark source of an asynchronous replication (issue 20): ``format("changefeed-replication")``.

Reads the changefeed topics of one replication's source, every item and partition at once:

* a source on this machine (``file://``): its embedded topic store, directly;
* a source node (``changefeed://``): its Kafka endpoint, with a librdkafka consumer (per Spark task, or the driver's)
  (``assign`` from the batch's first offset, consume to its end), authenticated with SASL
  SCRAM-SHA-256 as the replication's ``USER`` when it has one, TLS for ``changefeeds://``.

Options: ``path`` (the destination database directory) and ``replication`` (its id). Rows:
``item int, partition int, offset long, ts long, value binary``. Offsets are JSON dicts
``{"<item>:<partition>": <next offset>}``; the first comes from the destination's own record of
what it applied (``_replication_offsets``), not from Spark's checkpoint, so a restart from an
empty checkpoint neither repeats nor skips a change. A partition whose records were deleted by the
source's retention before they were read is an error: the replication cannot be complete.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.exceptions import InvalidOption, ReplicationError
from changefeed.feeds import replication as R
from changefeed.topics.store import TopicStore

__all__ = [
    "ARROW_SCHEMA",
    "SCHEMA",
    "KafkaTopics",
    "LocalTopics",
    "ReplicationDataSource",
    "SourceTopics",
    "open_topics",
    "read_partition",
    "replication_key",
]

SCHEMA = "item int, partition int, offset long, ts long, value binary"
ARROW_SCHEMA = pa.schema(
    [
        pa.field("item", pa.int32()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("ts", pa.int64()),
        pa.field("value", pa.binary()),
    ]
)
#: Records per Arrow batch handed to Spark.
CHUNK = 50_000
#: Default cap of a micro-batch (records over every partition).
MAX_RECORDS = 500_000
#: Seconds a Kafka read may go without a record before it gives up (the source is unreachable).
KAFKA_STALL_S = 60.0


class SourceTopics(Protocol):
    def watermarks(self, topic: str, partition: int) -> tuple[int, int]: ...

    def read(
        self, topic: str, partition: int, start: int, end: int
    ) -> Iterator[tuple[Sequence[int], Sequence[int], Sequence[bytes]]]:
        """Records ``[start, end)`` in chunks of (offsets, commit times in ns, values)."""
        ...

    def close(self) -> None: ...


class LocalTopics:
    """The source's embedded topic store, on this machine."""

    def __init__(self, path: str) -> None:
        self.store = TopicStore(path)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return self.store.partition_offsets(topic, partition)

    def read(
        self, topic: str, partition: int, start: int, end: int
    ) -> Iterator[tuple[Sequence[int], Sequence[int], Sequence[bytes]]]:
        info = self.store.topic(topic)
        at = start
        while at < end:
            cols = self.store.read_columns(info, partition, at, min(CHUNK, end - at))
            if not cols.offsets:
                return
            yield cols.offsets, cols.timestamps, cols.values
            at = cols.offsets[-1] + 1

    def close(self) -> None:
        self.store.close()


class KafkaTopics:
    """The source node's Kafka endpoint."""

    def __init__(self, spec: R.ReplicationSpec, password: str | None) -> None:
        from confluent_kafka import Consumer

        ep = spec.endpoint
        conf: dict[str, Any] = {
            "bootstrap.servers": ep.kafka,
            "group.id": f"changefeed-replication-{spec.name}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "fetch.max.bytes": 64 << 20,
            "socket.timeout.ms": 30_000,
            "client.id": "changefeed-async-replication",
        }
        if spec.user is not None:
            conf.update(
                {
                    "security.protocol": "SASL_SSL" if ep.tls else "SASL_PLAINTEXT",
                    "sasl.mechanisms": "SCRAM-SHA-256",
                    "sasl.username": spec.user,
                    "sasl.password": password or "",
                }
            )
        elif ep.tls:
            conf["security.protocol"] = "SSL"
        if ep.tls and spec.ca_cert:
            conf["ssl.ca.pem"] = spec.ca_cert
        self.endpoint = ep.kafka
        self.consumer = Consumer(conf)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        except KafkaException as exc:
            raise ReplicationError(
                f"cannot read {topic} partition {partition} at {self.endpoint}: {exc}"
            ) from None
        return int(low), int(high)

    def read(
        self, topic: str, partition: int, start: int, end: int
    ) -> Iterator[tuple[Sequence[int], Sequence[int], Sequence[bytes]]]:
        import time

        from confluent_kafka import KafkaError, TopicPartition

        self.consumer.assign([TopicPartition(topic, partition, start)])
        at = start
        idle_since = time.monotonic()
        try:
            while at < end:
                msgs = self.consumer.consume(num_messages=min(CHUNK, end - at), timeout=1.0)
                if not msgs:
                    if time.monotonic() - idle_since > KAFKA_STALL_S:
                        raise ReplicationError(
                            f"{topic} partition {partition} at {self.endpoint}: no record for {KAFKA_STALL_S:.0f} s"
                            f" while waiting for offsets {at} to {end}"
                        )
                    continue
                idle_since = time.monotonic()
                offsets: list[int] = []
                tss: list[int] = []
                values: list[bytes] = []
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise ReplicationError(
                            f"{topic} partition {partition} at {self.endpoint}: {err.str()}"
                        )
                    got = m.offset()
                    o = int(got) if got is not None else at
                    if o >= end:
                        break
                    offsets.append(o)
                    tss.append(int(m.timestamp()[1]) * 1_000_000)
                    values.append(bytes(m.value() or b""))
                if offsets:
                    yield offsets, tss, values
                    at = offsets[-1] + 1
                elif msgs and (msgs[-1].offset() or 0) >= end:
                    break
        finally:
            self.consumer.unassign()

    def close(self) -> None:
        self.consumer.close()


def open_topics(db: Path, rep: R.Replication) -> SourceTopics:
    ep = rep.spec.endpoint
    if ep.path is not None:
        return LocalTopics(ep.path)
    password = None
    if rep.spec.password_secret is not None:
        conn = open_sqlite(db / DB_FILE, readonly=True)
        try:
            password = R.secret_value(conn, rep.spec.password_secret)
        finally:
            conn.close()
    return KafkaTopics(rep.spec, password)


def read_partition(
    topics: SourceTopics, name: str, topic: str, partition: int, start: int, end: int
) -> Iterator[tuple[Sequence[int], Sequence[int], Sequence[bytes]]]:
    """Records ``[start, end)`` of one source topic partition, all of them: offsets deleted by the
    source's retention before they were read, or missing, are a ReplicationError."""
    low, _ = topics.watermarks(topic, partition)
    if low > start:
        raise ReplicationError(
            f"asynchronous replication {name}: {topic} partition {partition} lost"
            f" offsets {start} to {low - 1} to the source's retention before they were applied"
        )
    expect = start
    for offsets, tss, values in topics.read(topic, partition, start, end):
        if offsets and offsets[0] != expect:
            raise ReplicationError(
                f"asynchronous replication {name}: {topic} partition {partition}:"
                f" offset {expect} is missing (next is {offsets[0]})"
            )
        expect = offsets[-1] + 1 if offsets else expect
        yield offsets, tss, values


def replication_key(item: int, partition: int) -> str:
    """A partition's key in this source's offsets: ``"<item>:<partition>"``."""
    return f"{item}:{partition}"


def _replication(db: Path, rid: int) -> R.Replication:
    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        rep = R.get(conn, rid)
    finally:
        conn.close()
    if rep is None:
        raise ReplicationError(f"asynchronous replication {rid} no longer exists in {db}")
    return rep


class ReplicationPartition(InputPartition):
    """Offsets ``[start, end)`` of one partition of one item's topic."""

    def __init__(self, item: int, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((item, partition, start, end))
        self.item, self.topic, self.partition, self.start, self.end = item, topic, partition, start, end


class ReplicationStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, db: Path, rid: int, max_records: int) -> None:
        self.db, self.rid, self.max_records = db, rid, max_records
        self.rep = _replication(db, rid)
        self._topics: SourceTopics | None = None
        self._target: dict[str, int] | None = None

    def topics(self) -> SourceTopics:
        if self._topics is None:
            self._topics = open_topics(self.db, self.rep)
        return self._topics

    def initialOffset(self) -> dict[str, Any]:
        conn = open_sqlite(self.db / DB_FILE, readonly=True)
        try:
            pos = R.positions(conn, self.rid)
        finally:
            conn.close()
        return {replication_key(i, p): v.next_offset for (i, p), v in pos.items()}

    def _ends(self) -> dict[str, int]:
        t = self.topics()
        return {
            replication_key(it.item_id, p): t.watermarks(it.topic, p)[1]
            for it in self.rep.items
            for p in range(it.partitions)
        }

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._ends()

    def reportLatestOffset(self) -> dict[str, Any]:
        return self._ends()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        ends = self._target if self._target is not None else self._ends()
        cap = (
            None if isinstance(limit, ReadAllAvailable) else int(getattr(limit, "max_rows", self.max_records))
        )
        out: dict[str, int] = {}
        pending = {k: max(0, ends.get(k, 0) - int(start.get(k, 0))) for k in ends}
        share = None if cap is None else max(1, cap // max(1, sum(1 for v in pending.values() if v)))
        for k, end in ends.items():
            s = int(start.get(k, 0))
            out[k] = max(s, end if share is None else min(end, s + share))
        return out

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        parts: list[InputPartition] = []
        for it in self.rep.items:
            for p in range(it.partitions):
                k = replication_key(it.item_id, p)
                s, e = int(start.get(k, 0)), int(end.get(k, 0))
                if e > s:
                    parts.append(ReplicationPartition(it.item_id, it.topic, p, s, e))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ReplicationPartition)
        part = partition
        topics = open_topics(self.db, self.rep)
        try:
            for offsets, tss, values in read_partition(
                topics, self.rep.name, part.topic, part.partition, part.start, part.end
            ):
                n = len(offsets)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.full(n, part.item, np.int32)),
                        pa.array(np.full(n, part.partition, np.int32)),
                        pa.array(np.arange(offsets.start, offsets.stop, dtype=np.int64))
                        if isinstance(offsets, range)
                        else pa.array(offsets, pa.int64()),
                        pa.array(tss, pa.int64()),
                        pa.array(values, pa.binary()),
                    ],
                    schema=ARROW_SCHEMA,
                )
        finally:
            topics.close()

    def commit(self, end: dict[str, Any]) -> None:
        pass

    def stop(self) -> None:
        if self._topics is not None:
            self._topics.close()
            self._topics = None


class ReplicationDataSource(DataSource):
    """``format("changefeed-replication")``: one replication's source topics (streaming)."""

    @classmethod
    def name(cls) -> str:
        return "changefeed-replication"

    def schema(self) -> StructType | str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts: Mapping[str, str] = self.options
        lowered = {k.lower(): v for k, v in opts.items()}
        path = lowered.get("path")
        rid = lowered.get("replication")
        if not path or not rid or not rid.isdigit():
            raise InvalidOption(
                "format('changefeed-replication') needs .load(dbdir) and option replication (an id)"
            )
        raw = lowered.get("maxrecordspertrigger")
        return ReplicationStreamReader(
            Path(path), int(rid), int(raw) if raw and raw.isdigit() else MAX_RECORDS
        )
