"""Issue 21 item 7: the ``changefeed`` and ``phoenix-cdc`` Spark sources' options, modelled on
Spark's Kafka source, through PySpark: the documented defaults (a stream starts at the latest
offset), Kafka's option names, ``failOnDataLoss``, timestamps, ``minPartitions``, and errors that
are one line at ``.load()``, not a worker's traceback inside an AnalysisException."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import changefeed
from changefeed.exceptions import InvalidOption, PhoenixTableUndefined, TopicError
from changefeed.topics import TopicStore

pytestmark = pytest.mark.spark

TOPIC = "opts"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("srcopts") / "db"
    with changefeed.connect(str(path)) as conn:
        conn.execute("CREATE TABLE T (K INTEGER NOT NULL, V1 INTEGER, CONSTRAINT PK PRIMARY KEY (K))")
        conn.execute("CREATE CDC C ON T INCLUDE (PRE, POST)")
    st = TopicStore(path)
    st.ensure_topic(TOPIC, 2)
    _append(path, 0, 10)
    return path


def _append(db: Path, first: int, n: int, topic: str = TOPIC, partitions: int = 2) -> None:
    st = TopicStore(db)
    for i in range(first, first + n):
        now = time.time_ns()
        records = pa.table({"key": [b"k%d" % i], "value": [b"v%d" % i], "ts": pa.array([now], pa.int64())})
        st.append(topic, i % partitions, f"test-{topic}-{i}", 0, records)


def _stream(spark: Any, db: Path, tmp: Path, **opts: str) -> list[tuple[int, int, bytes]]:
    """One AvailableNow run of a stream into memory; its rows."""
    name = f"q{time.monotonic_ns()}"
    df = spark.readStream.format("changefeed").option("topic", TOPIC).options(**opts).load(str(db))
    q = (
        df.selectExpr("partition", "offset", "value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp / name))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    rows = [(r.partition, r.offset, bytes(r.value)) for r in spark.sql(f"SELECT * FROM {name}").collect()]
    return sorted(rows)


def test_a_stream_starts_at_the_latest_offset_unless_told(spark: Any, db: Path, tmp_path: Path) -> None:
    assert _stream(spark, db, tmp_path) == []  # Spark's Kafka source's default: latest
    everything = _stream(spark, db, tmp_path, startingOffsets="earliest")
    assert len(everything) >= 10
    batch = spark.read.format("changefeed").option("topic", TOPIC).load(str(db)).collect()
    assert len(batch) == len(everything)  # a batch read's default: earliest


def test_kafka_option_names(spark: Any, db: Path, tmp_path: Path) -> None:
    # Kafka's topic-keyed JSON, subscribe, endingOffsets, maxOffsetsPerTrigger, minPartitions
    start = json.dumps({TOPIC: {"0": 1, "1": -2}})
    end = json.dumps({"0": 3, "1": 2})
    df = (
        spark.read.format("changefeed")
        .option("subscribe", TOPIC)
        .option("startingOffsets", start)
        .option("endingOffsets", end)
        .option("minPartitions", "3")
        .load(str(db))
    )
    assert df.rdd.getNumPartitions() >= 3
    assert sorted((r.partition, r.offset) for r in df.collect()) == [(0, 1), (0, 2), (1, 0), (1, 1)]
    name = f"limited{time.monotonic_ns()}"
    q = (
        spark.readStream.format("changefeed")
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "4")
        .load(str(db))
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes and max(sizes) <= 4 and sum(sizes) >= 10


def test_starting_timestamp(spark: Any, db: Path) -> None:
    cut_ms = time.time_ns() // 1_000_000 + 1
    time.sleep(0.01)
    _append(db, 100, 4)
    df = spark.read.format("changefeed").option("topic", TOPIC).option("startingTimestamp", str(cut_ms))
    assert sorted(bytes(r.value) for r in df.load(str(db)).collect()) == [b"v100", b"v101", b"v102", b"v103"]
    later = str(time.time_ns() // 1_000_000 + 60_000)
    with pytest.raises(Exception, match="No offset matched"):  # Spark's words, raised when it plans
        spark.read.format("changefeed").option("topic", TOPIC).option("startingTimestamp", later).load(
            str(db)
        ).collect()


def test_fail_on_data_loss(spark: Any, db: Path, tmp_path: Path) -> None:
    st = TopicStore(db)
    st.ensure_topic("lossy", 1, retention_ns=3600 * 10**9)
    _append(db, 0, 4, topic="lossy", partitions=1)
    st.apply_retention(time.time_ns() + 7200 * 10**9)  # records 0..3 aged out
    _append(db, 4, 2, topic="lossy", partitions=1)
    read = spark.read.format("changefeed").option("topic", "lossy").option("startingOffsets", '{"0": 1}')
    with pytest.raises(Exception, match="failOnDataLoss"):
        read.load(str(db)).collect()
    rows = read.option("failOnDataLoss", "false").load(str(db)).collect()
    assert [r.offset for r in rows] == [4, 5]


@pytest.mark.parametrize(
    ("fmt", "options", "error", "text"),
    [
        ("changefeed", {"topic": "nope"}, TopicError, "topic 'nope' does not exist"),
        ("changefeed", {"subscribe": "a,b"}, InvalidOption, "one topic per source"),
        ("changefeed", {"topic": TOPIC, "startingOffsets": "{oops"}, InvalidOption, "startingOffsets"),
        ("changefeed", {"topic": TOPIC, "failOnDataLoss": "maybe"}, InvalidOption, "failOnDataLoss"),
        ("changefeed", {"topic": TOPIC, "includeHeaders": "true"}, InvalidOption, "headers"),
        ("phoenix-cdc", {"cdc": "NOPE"}, PhoenixTableUndefined, "ERROR 1012 (42M03): Table undefined."),
        (
            "phoenix-cdc",
            {"cdc": "C", "startTime": "yesterday"},
            InvalidOption,
            'Unparseable date: "yesterday"',
        ),
        ("phoenix-cdc", {"cdc": "C", "safetyMarginMs": "x"}, InvalidOption, "safetyMarginMs"),
    ],
)
def test_errors_are_one_line_at_load(
    spark: Any, db: Path, fmt: str, options: dict[str, str], error: type[Exception], text: str
) -> None:
    for reader in (spark.read, spark.readStream):
        with pytest.raises(error) as info:
            reader.format(fmt).options(**options).load(str(db))
        message = str(info.value)
        assert text in message and "\n" not in message and "Traceback" not in message, message
