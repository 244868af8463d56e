"""The Spark source over the embedded topics: format("changefeed"), batch and streaming."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from changefeed.exceptions import InvalidOption
from changefeed.pipeline.sources.topics import TopicDataSource, TopicStreamReader, _water_fill
from changefeed.topics import TopicStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

TOPIC = "orders/updates_feed"


def batch(values: list[bytes], ts0: int = 0) -> pa.Table:
    return pa.table(
        {
            "key": pa.array([b"k%d" % i for i in range(len(values))], pa.binary()),
            "value": pa.array(values, pa.binary()),
            "ts": pa.array(range(ts0, ts0 + len(values)), pa.int64()),
        }
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    d = tmp_path / "db"
    d.mkdir()
    s = TopicStore(d)
    s.ensure_topic(TOPIC, 3, 0)
    for p in range(3):
        s.append(TOPIC, p, "w", 0, batch([b"p%d-%d" % (p, i) for i in range(4)], ts0=10 * p))
    return d


# -- driver-side logic, no Spark needed ------------------------------------------------------


def test_options_validation(db: Path) -> None:
    ok = {"path": str(db), "topic": TOPIC}
    with pytest.raises(InvalidOption, match="topic"):
        TopicDataSource({"path": str(db)}).streamReader(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="database directory"):
        TopicDataSource({"topic": TOPIC}).reader(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="startingOffsets"):
        TopicDataSource({**ok, "startingOffsets": "middle"}).reader(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidOption, match="maxRecordsPerTrigger"):
        TopicDataSource({**ok, "maxRecordsPerTrigger": "0"}).streamReader(None)  # type: ignore[arg-type]


def test_stream_reader_offsets_and_admission_control(db: Path) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

    reader = TopicDataSource({"path": str(db), "topic": TOPIC, "startingOffsets": "earliest"}).streamReader(
        None  # type: ignore[arg-type]
    )
    assert isinstance(reader, TopicStreamReader)
    start = reader.initialOffset()
    assert start == {"0": 0, "1": 0, "2": 0}
    assert reader.latestOffset(start, ReadAllAvailable()) == {"0": 4, "1": 4, "2": 4}
    assert reader.latestOffset(start, ReadMaxRows(7)) == {"0": 3, "1": 2, "2": 2}
    assert reader.latestOffset({"0": 4, "1": 0, "2": 4}, ReadMaxRows(3)) == {"0": 4, "1": 3, "2": 4}
    parts = reader.partitions({"0": 4, "1": 0, "2": 2}, {"0": 4, "1": 3, "2": 4})
    assert [(p.partition, p.start, p.end) for p in parts] == [(1, 0, 3), (2, 2, 4)]  # type: ignore[attr-defined]
    reader.prepareForTriggerAvailableNow()
    TopicStore(db).append(TOPIC, 0, "w", 1, batch([b"late"]))
    assert reader.latestOffset(start, ReadAllAvailable()) == {"0": 4, "1": 4, "2": 4}  # capped at target
    latest = TopicDataSource({"path": str(db), "topic": TOPIC}).streamReader(None)  # type: ignore[arg-type]
    assert latest.initialOffset() == {"0": 5, "1": 4, "2": 4}


def test_water_fill() -> None:
    assert _water_fill({0: 10, 1: 1, 2: 10}, 9) == {0: 4, 1: 1, 2: 4}
    assert _water_fill({0: 0, 1: 2}, 100) == {0: 0, 1: 2}
    assert sum(_water_fill({0: 5, 1: 5, 2: 5}, 2).values()) == 2


# -- Spark -----------------------------------------------------------------------------------


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted((r.partition, r.offset, bytes(r.value)) for r in df.collect())


def test_batch_read(spark: SparkSession, db: Path) -> None:
    df = spark.read.format("changefeed").option("topic", TOPIC).load(str(db))
    assert df.schema.simpleString() == (
        "struct<topic:string,partition:int,offset:bigint,key:binary,value:binary,ts:bigint,write_time:timestamp>"
    )
    assert df.rdd.getNumPartitions() == 3
    got = df.collect()
    assert len(got) == 12
    first = min(got, key=lambda r: (r.partition, r.offset))
    assert first.topic == TOPIC and bytes(first.key) == b"k0" and first.ts == 0
    assert isinstance(first.write_time, dt.datetime)
    offsets = json.dumps({"1": 2, "2": -1})
    part = (
        spark.read.format("changefeed")
        .option("topic", TOPIC)
        .option("startingOffsets", offsets)
        .load(str(db))
    )
    assert rows(part) == [(0, o, b"p0-%d" % o) for o in range(4)] + [(1, 2, b"p1-2"), (1, 3, b"p1-3")]
    ending = (
        spark.read.format("changefeed")
        .options(topic=TOPIC, path=str(db), endingOffsets='{"0": 1, "1": 0, "2": 0}')
        .load()
    )
    assert rows(ending) == [(0, 0, b"p0-0")]


def test_batch_read_unknown_topic(spark: SparkSession, db: Path) -> None:
    with pytest.raises(Exception, match="topic 'nope' does not exist"):
        spark.read.format("changefeed").option("topic", "nope").load(str(db)).collect()


def test_streaming_available_now_resumes_from_checkpoint(
    spark: SparkSession, db: Path, tmp_path: Path
) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    store = TopicStore(db)

    def run(**options: str) -> tuple[list[tuple[Any, ...]], list[int]]:
        got: list[tuple[Any, ...]] = []

        def sink(df: DataFrame, batch_id: int) -> None:
            got.extend(rows(df))

        q = (
            spark.readStream.format("changefeed")
            .option("topic", TOPIC)
            .options(**options)
            .load(str(db))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        return sorted(got), [p["numInputRows"] for p in q.recentProgress]

    got, per_batch = run(startingOffsets="earliest", maxRecordsPerTrigger="5", group="spark")
    assert len(got) == 12
    assert sorted(n for n in per_batch if n) == [2, 5, 5]  # admission control
    # Spark commits a batch's offsets to the source when it plans the next one, so the group
    # lags the last batch of a run (at-least-once progress, never ahead of what was processed).
    committed = store.committed_offsets("spark", TOPIC)
    assert 5 <= sum(committed.values()) <= 12 and all(o <= 4 for o in committed.values())
    store.append(TOPIC, 1, "w", 1, batch([b"new-1"]))
    store.append(TOPIC, 2, "w", 1, batch([b"new-2a", b"new-2b"]))
    got, _ = run(startingOffsets="earliest")  # ignored: the checkpoint decides
    assert got == [(1, 4, b"new-1"), (2, 4, b"new-2a"), (2, 5, b"new-2b")]
    got, _ = run()
    assert got == []


def test_streaming_latest_default_and_retention_skip(spark: SparkSession, db: Path, tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    clock = [10**18]
    store = TopicStore(db, clock=lambda: clock[0])
    store.ensure_topic("skip", 1, 1_000)
    store.append("skip", 0, "w", 0, batch([b"old"]))

    def run(**options: str) -> list[tuple[Any, ...]]:
        got: list[tuple[Any, ...]] = []
        q = (
            spark.readStream.format("changefeed")
            .option("topic", "skip")
            .options(**options)
            .load(str(db))
            .writeStream.foreachBatch(lambda df, _id: got.extend(rows(df)))
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        return sorted(got)

    assert run() == []  # streaming starts at the end by default
    store.append("skip", 0, "w", 1, batch([b"a", b"b"]))
    clock[0] += 10_000
    store.append("skip", 0, "w", 2, batch([b"c"]))
    assert store.apply_retention() == 3  # "old", "a", "b" expired unread
    # Spark's Kafka source's rule: records gone before they were read fail the query ...
    with pytest.raises(Exception, match="failOnDataLoss"):
        run()
    # ... unless failOnDataLoss is false: then offsets 1..2 are skipped
    assert run(failOnDataLoss="false") == [(0, 3, b"c")]
