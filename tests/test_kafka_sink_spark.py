"""CockroachDB jobs ``INTO 'kafka://127.0.0.1:PORT'`` run on Spark, delivering to the Kafka
endpoint (one per module, in-process, port 0, over its own database directory: the "cluster"),
read back with confluent-kafka and checked with the cdctest-style validators: per-key order, no
gaps or duplicates, before/after images with ``diff``, resolved timestamps. Then ``kill -9`` of
``changefeed run`` mid-stream (once here; ten times in the soak), after which delivery is at
least once: repeats only of already delivered changes, nothing lost; and an unreachable broker,
which the job retries and then pauses (``on_error='pause'``) with the producer's error."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.pipeline.sinks.kafka import partition_for
from changefeed.server import EndpointConfig
from changefeed.server.kafka import create
from changefeed.testing import validators as v
from changefeed.testing import workload as w
from tests.test_kafka import LoopThread

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")

pytestmark = pytest.mark.spark

PY = sys.executable
ROOT = Path(__file__).parents[1]
PARTITIONS = 3
OPTIONS = "WITH updated, diff, resolved = '1s', min_checkpoint_frequency = '1s'"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    lt = LoopThread()
    db = tmp_path_factory.mktemp("kafka-cluster") / "db"
    changefeed.connect(db).close()
    ep = create(EndpointConfig(db=db))
    p = lt.start(ep)
    yield p
    lt.call(ep.stop())
    lt.close()


def _make_topic(port: int, topic: str) -> None:
    admin = ck_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    admin.create_topics([ck_admin.NewTopic(topic, PARTITIONS, 1)])[topic].result(10)


class Reader:
    """All records of a topic, partition by partition, with confluent-kafka."""

    def __init__(self, port: int, topic: str) -> None:
        self.topic = topic
        self.c = ck.Consumer(
            {"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"v-{topic}", "enable.auto.commit": False}
        )

    def total(self) -> int:
        return sum(
            self.c.get_watermark_offsets(ck.TopicPartition(self.topic, p), 5)[1] for p in range(PARTITIONS)
        )

    def records(self) -> list[tuple[int, int, bytes | None, bytes, int]]:
        ends = {
            p: self.c.get_watermark_offsets(ck.TopicPartition(self.topic, p), 5)[1] for p in range(PARTITIONS)
        }
        self.c.assign([ck.TopicPartition(self.topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: list[tuple[int, int, bytes | None, bytes, int]] = []
        deadline = time.monotonic() + 60
        while len(out) < sum(ends.values()) and time.monotonic() < deadline:
            for m in self.c.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out.append(
                    (m.partition(), m.offset(), m.key(), m.value() or b"", m.timestamp()[1] * 1_000_000)
                )
        self.c.unassign()
        assert len(out) == sum(ends.values())
        return out

    def close(self) -> None:
        self.c.close()


def _validate(db: Path, records: list[Any], *, at_least_once: bool) -> v.Report:
    return v.validate_records(
        db, "t", records, partition_of_key=lambda k: partition_for(k, PARTITIONS), at_least_once=at_least_once
    )


def _until_idle(db: Path, spark: Any) -> None:
    from changefeed.exceptions import PipelineError
    from changefeed.pipeline.runner import run_until_idle

    for attempt in range(3):  # a Python worker that misses its connect-back under load: run again
        try:
            run_until_idle(db, spark=spark, gc=False)
            return
        except PipelineError:
            if attempt == 2:
                raise


def test_job_into_kafka_delivers_a_random_workload(tmp_path: Path, spark: Any, port: int) -> None:
    db = tmp_path / "db"
    w.setup_sql(db, feed=None, initial_rows=20)
    _make_topic(port, "t")
    with changefeed.connect(db) as conn:
        (job_id,) = conn.execute(f"CREATE CHANGEFEED FOR t INTO 'kafka://127.0.0.1:{port}' {OPTIONS}").rows[0]
        assert conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][14] == "t"
    stats = w.run_sql(db, seed=5, txns=150, keys=40)
    assert stats.committed > 50
    _until_idle(db, spark)
    reader = Reader(port, "t")
    try:
        records = reader.records()
    finally:
        reader.close()
    rep = _validate(db, records, at_least_once=False)
    assert rep.ok, str(rep)
    assert rep.stats["data_records"] == rep.stats["change_rows"] + 20  # + the initial scan's rows
    assert rep.stats["resolved_records"] > 0
    # resolved messages go to every partition
    assert {p for p, _, k, _, _ in records if k is None} == set(range(PARTITIONS))


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = PY
    env["PYSPARK_DRIVER_PYTHON"] = PY
    env["CHANGEFEED_GC_MIN_AGE_S"] = str(10**9)
    env["PYTHONPATH"] = str(ROOT / "src")
    env.update(extra)
    return env


def _cmd(db: Path) -> list[str]:
    return [PY, "-m", "changefeed.cli.main", "run", "--db", str(db), "--max-rows", "500"]


@pytest.mark.parametrize(
    "kills",
    [
        pytest.param(1, id="one-kill"),
        pytest.param(10, id="soak-10-kills", marks=[pytest.mark.slow, pytest.mark.soak]),
    ],
)
def test_kill_9_mid_stream_is_at_least_once(tmp_path: Path, spark: Any, port: int, kills: int) -> None:
    db = tmp_path / "db"
    topic = f"kills{kills}_t"
    w.setup_sql(db, feed=None, initial_rows=20)
    _make_topic(port, topic)
    with changefeed.connect(db) as conn:
        conn.execute(
            f"CREATE CHANGEFEED FOR t INTO 'kafka://127.0.0.1:{port}?topic_prefix=kills{kills}_' {OPTIONS}"
        )
    rng = random.Random(99)
    bg = w.Background(db, seeds=[11], txns=None, duration=10.0 + (kills - 1) * 20.0, sleep=0.01, keys=50)
    reader = Reader(port, topic)
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115
    try:
        for _ in range(kills):
            before = reader.total()
            proc = subprocess.Popen(
                _cmd(db),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
                start_new_session=True,
            )
            try:
                deadline = time.monotonic() + 240
                while reader.total() == before and proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert reader.total() > before, (tmp_path / "runner.log").read_text()[-3000:]
                time.sleep(rng.uniform(0.5, 3.0))
            finally:
                os.killpg(proc.pid, signal.SIGKILL)  # the runner and its JVM: kill -9
                proc.wait()
        stats = bg.join(timeout=600)
        assert sum(s.committed for s in stats) > 100
        _until_idle(db, spark)  # the restart after the last kill, in this process's Spark session
        records = reader.records()
    finally:
        log.close()
        reader.close()
    rep = v.validate_records(
        db,
        topic,
        records,
        partition_of_key=lambda k: partition_for(k, PARTITIONS),
        at_least_once=True,
    )
    assert rep.ok, str(rep)
    assert rep.stats["data_records"] == rep.stats["change_rows"] + 20
    assert rep.stats["resolved_records"] > 0


def test_unreachable_broker_retries_then_pauses(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import threading

    from changefeed.pipeline import runner
    from changefeed.pipeline.sinks import kafka as KW

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    db = tmp_path / "db"
    w.setup_sql(db, feed=None, initial_rows=5)
    with changefeed.connect(db) as conn:
        (job_id,) = conn.execute(
            f"CREATE CHANGEFEED FOR t INTO 'kafka://127.0.0.1:{dead}' WITH on_error = 'pause'"
        ).rows[0]
    monkeypatch.setattr(KW, "METADATA_TIMEOUT_S", 1.0)
    monkeypatch.setattr(runner, "RETRY_FIRST_S", 0.5)
    stop = threading.Event()
    t = threading.Thread(
        target=runner.run_forever, args=(db,), kwargs={"spark": spark, "stop": stop, "install_signals": False}
    )
    caplog.set_level("WARNING")
    t.start()
    try:
        deadline = time.monotonic() + 180
        status = error = ""
        while time.monotonic() < deadline and t.is_alive():
            with changefeed.connect(db) as conn:
                res = conn.execute(f"SHOW CHANGEFEED JOB {job_id}")
                row = dict(zip(res.columns, res.rows[0], strict=True))
            status, error = str(row["status"]), str(row["error"] or "")
            if status == "paused":
                break
            time.sleep(0.3)
    finally:
        stop.set()
        t.join(120)
    assert status == "paused", error
    assert "but is being paused because of on_error=pause" in error
    assert f"kafka sink: connecting to kafka: 127.0.0.1:{dead}" in error, error
    assert "retrying (1 of 3)" in caplog.text
