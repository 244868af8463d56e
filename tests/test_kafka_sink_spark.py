"""CockroachDB jobs ``INTO 'kafka://<Apache Kafka 4.4>'`` run on Spark, delivering to the real
broker of the session (``kafka_broker`` in conftest), read back with confluent-kafka and checked
with the cdctest-style validators: per-key order, no gaps or duplicates, before/after images with
``diff``, resolved timestamps. Then ``kill -9`` of ``changefeed run`` mid-stream with the broker
restarted while the job runs (one kill and one restart here; ten kills and two restarts in the
soak): delivery is at least once, repeats only of already delivered changes, nothing lost. With
``exactly_once`` a ``read_committed`` consumer sees every change once across the kills. A broker
that is down is retried without giving up; a broker's refusal pauses the job at once with
``on_error='pause'``."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import confluent_kafka.admin as ck_admin
import pytest

import changefeed
from changefeed.pipeline.sinks.kafka import partition_for
from changefeed.testing import validators as v, workload as w
from changefeed.testing.kafka_broker import KafkaBroker

pytestmark = pytest.mark.spark

PY = sys.executable
ROOT = Path(__file__).parents[1]
PARTITIONS = 3
OPTIONS = "WITH updated, diff, resolved = '1s', min_checkpoint_frequency = '1s'"


@pytest.fixture(scope="module")
def bootstrap(kafka_broker: KafkaBroker) -> str:
    return kafka_broker.bootstrap


def _make_topic(bootstrap: str, topic: str) -> None:
    admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([ck_admin.NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


class Reader:
    """All records of a topic, partition by partition, with confluent-kafka (``read_committed``:
    what a consumer of an exactly-once job sees; the same as ``read_uncommitted`` without
    transactions)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.c = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"v-{topic}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
            }
        )

    def total(self) -> int:
        """The topic's high watermarks summed (retried while a restarted broker comes back)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                return sum(
                    self.c.get_watermark_offsets(ck.TopicPartition(self.topic, p), 10)[1]
                    for p in range(PARTITIONS)
                )
            except ck.KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def records(self) -> list[tuple[int, int, bytes | None, bytes, int]]:
        self.c.assign([ck.TopicPartition(self.topic, p, ck.OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: list[tuple[int, int, bytes | None, bytes, int]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 120
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            for m in self.c.consume(1000, 0.5):
                if m.error() is not None:
                    assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                    at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                out.append(
                    (m.partition(), m.offset(), m.key(), m.value() or b"", m.timestamp()[1] * 1_000_000)
                )
        self.c.unassign()
        assert len(at_end) == PARTITIONS, "the topic was not read to its end"
        return out

    def close(self) -> None:
        self.c.close()


def _validate(db: Path, records: list[Any], *, at_least_once: bool, topic: str = "t") -> v.Report:
    return v.validate_records(
        db,
        topic,
        records,
        partition_of_key=lambda k: partition_for(k, PARTITIONS),
        at_least_once=at_least_once,
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


def test_job_into_kafka_delivers_a_random_workload(tmp_path: Path, spark: Any, bootstrap: str) -> None:
    db = tmp_path / "db"
    w.setup_sql(db, feed=None, initial_rows=20)
    _make_topic(bootstrap, "wl_t")
    with changefeed.connect(db) as conn:
        (job_id,) = conn.execute(
            f"CREATE CHANGEFEED FOR t INTO 'kafka://{bootstrap}?topic_prefix=wl_' {OPTIONS}"
        ).rows[0]
        assert conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][14] == "wl_t"
    stats = w.run_sql(db, seed=5, txns=150, keys=40)
    assert stats.committed > 50
    _until_idle(db, spark)
    reader = Reader(bootstrap, "wl_t")
    try:
        records = reader.records()
    finally:
        reader.close()
    rep = _validate(db, records, at_least_once=False, topic="wl_t")
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
    ("kills", "restarts", "exactly_once"),
    [
        pytest.param(1, 1, False, id="one-kill-one-broker-restart"),
        pytest.param(2, 0, True, id="exactly-once-two-kills"),
        pytest.param(10, 2, False, id="soak-10-kills-2-restarts", marks=[pytest.mark.slow, pytest.mark.soak]),
        pytest.param(
            10,
            2,
            True,
            id="soak-exactly-once-10-kills-2-restarts",
            marks=[pytest.mark.slow, pytest.mark.soak],
        ),
    ],
)
def test_kill_9_and_broker_restarts(
    tmp_path: Path, spark: Any, kafka_broker: KafkaBroker, kills: int, restarts: int, exactly_once: bool
) -> None:
    """At least once (repeats only as whole replayed batches), or with ``exactly_once`` no
    repeat at all for a read_committed consumer; nothing lost either way."""
    db = tmp_path / "db"
    prefix = f"k{kills}r{restarts}{'x' if exactly_once else ''}_"
    topic = f"{prefix}t"
    w.setup_sql(db, feed=None, initial_rows=20)
    _make_topic(kafka_broker.bootstrap, topic)
    extra = ", exactly_once" if exactly_once else ""
    with changefeed.connect(db) as conn:
        conn.execute(
            f"CREATE CHANGEFEED FOR t INTO 'kafka://{kafka_broker.bootstrap}?topic_prefix={prefix}' {OPTIONS}{extra}"
        )
    rng = random.Random(99)
    restart_rounds = set(rng.sample(range(kills), restarts)) if restarts else set()
    bg = w.Background(db, seeds=[11], txns=None, duration=10.0 + (kills - 1) * 20.0, sleep=0.01, keys=50)
    reader = Reader(kafka_broker.bootstrap, topic)
    log = open(tmp_path / "runner.log", "wb")  # noqa: SIM115
    try:
        for round_ in range(kills):
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
                if round_ in restart_rounds:
                    kafka_broker.restart()  # the broker goes away mid-job and comes back
                    before = reader.total()
                    deadline = time.monotonic() + 240
                    while reader.total() == before and proc.poll() is None and time.monotonic() < deadline:
                        time.sleep(0.2)
                    assert reader.total() > before, (tmp_path / "runner.log").read_text()[-3000:]
                time.sleep(rng.uniform(0.5, 3.0))
            finally:
                os.killpg(proc.pid, signal.SIGKILL)  # the runner and its JVM: kill -9
                proc.wait()
        bg.stop()  # the kills are over: no need to wait out the workload's duration
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
        at_least_once=not exactly_once,
    )
    assert rep.ok, str(rep)
    assert rep.stats["data_records"] == rep.stats["change_rows"] + 20
    assert rep.stats["resolved_records"] > 0


def _job_row(db: Path, job_id: int) -> dict[str, Any]:
    with changefeed.connect(db) as conn:
        res = conn.execute(f"SHOW CHANGEFEED JOB {job_id}")
        return dict(zip(res.columns, res.rows[0], strict=True))


def _run_until(db: Path, spark: Any, done: Any, timeout: float = 180) -> None:
    import threading

    from changefeed.pipeline import runner

    stop = threading.Event()
    t = threading.Thread(
        target=runner.run_forever, args=(db,), kwargs={"spark": spark, "stop": stop, "install_signals": False}
    )
    t.start()
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and t.is_alive() and not done():
            time.sleep(0.3)
    finally:
        stop.set()
        t.join(120)


def test_broker_down_is_retried_without_giving_up_and_refusals_pause_at_once(
    tmp_path: Path,
    spark: Any,
    kafka_broker: KafkaBroker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from changefeed.pipeline import runner
    from changefeed.pipeline.sinks import kafka as KW

    db = tmp_path / "db"
    w.setup_sql(db, feed=None, initial_rows=5)
    with changefeed.connect(db) as conn:
        (down_job,) = conn.execute(
            f"CREATE CHANGEFEED FOR t INTO 'kafka://{kafka_broker.bootstrap}?topic_prefix=down_' WITH on_error = 'pause'"
        ).rows[0]
        (bob_job,) = conn.execute(
            f"CREATE CHANGEFEED FOR t INTO 'kafka://{kafka_broker.sasl_bootstrap}?topic_prefix=bob_&sasl_enabled=true"
            "&sasl_mechanism=SCRAM-SHA-256&sasl_user=bob&sasl_password=bob-secret' WITH on_error = 'pause'"
        ).rows[0]
    monkeypatch.setattr(KW, "METADATA_TIMEOUT_S", 1.0)
    monkeypatch.setattr(runner, "RETRY_FIRST_S", 0.2)
    monkeypatch.setattr(runner, "RETRY_MAX_S", 1.0)
    caplog.set_level("WARNING")
    kafka_broker.stop()
    try:
        # bob's job cannot even reach the broker: retried; once it is up, refused and paused
        _run_until(db, spark, lambda: caplog.text.count("retryable changefeed error") >= 4, timeout=120)
    finally:
        kafka_broker.start()
    assert _job_row(db, down_job)["status"] == "running"  # more than JOB_RETRIES failures: not given up
    _run_until(
        db,
        spark,
        lambda: (
            _job_row(db, bob_job)["status"] == "paused"
            and Reader(kafka_broker.bootstrap, "down_t").total() >= 5
        ),
    )
    bob = _job_row(db, bob_job)
    assert bob["status"] == "paused", bob
    assert "but is being paused because of on_error=pause" in bob["error"]
    assert "kafka server: The client is not authorized to access this topic" in bob["error"], bob["error"]
    assert _job_row(db, down_job)["status"] == "running"
