"""The Apache Phoenix CDC loop on Spark: ``format("phoenix-cdc")`` as a batch read (back-fill) and
as a stream of successive safe time ranges, delivering a concurrent workload exactly once into
Spark's file sink across a ``kill -9`` of the streaming process."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import changefeed
from changefeed.exceptions import ChangefeedError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark
PY = sys.executable
#: Kills of the streaming process: one in the unit suite; ``test_stream_survives_many_kills`` (slow) more.
KILLS = 1


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = PY
    env["PYSPARK_DRIVER_PYTHON"] = PY
    env["PYTHONPATH"] = str(Path(__file__).parents[1] / "src")
    return env


def _setup(db: Path) -> None:
    c = changefeed.connect(db)
    c.execute("CREATE TABLE T (k INTEGER PRIMARY KEY, v1 INTEGER, v2 VARCHAR) SALT_BUCKETS = 2")
    c.execute("CREATE CDC C ON T INCLUDE (PRE, POST) SALT_BUCKETS = 2")
    c.close()


def _expected(db: Path) -> list[tuple[Any, ...]]:
    c = changefeed.connect(db)
    try:
        rows = c.execute("SELECT * FROM C").rows
    finally:
        c.close()
    return sorted((r[0], r[1], r[2]) for r in rows)


def _workload(db: Path, stop: threading.Event, seed: int) -> None:
    rng = random.Random(seed)
    c = changefeed.connect(db)
    try:
        while not stop.is_set():
            with c.transaction():
                for _ in range(rng.randint(1, 20)):
                    k = rng.randint(0, 200)
                    if rng.random() < 0.2:
                        c.execute("DELETE FROM T WHERE k = ?", (k,))
                    else:
                        c.execute(
                            "UPSERT INTO T VALUES (?, ?, ?)", (k, rng.randint(0, 9), rng.choice(["a", None]))
                        )
            time.sleep(rng.random() * 0.01)
    finally:
        c.close()


def test_batch_read_is_the_cdc_query(spark: SparkSession, tmp_path: Path) -> None:
    db = tmp_path / "db"
    _setup(db)
    stop = threading.Event()
    stop.set()
    c = changefeed.connect(db)
    for i in range(30):
        c.execute("UPSERT INTO T VALUES (?, ?, 'x')", (i % 7, i))
    c.execute("DELETE FROM T WHERE k = 3")
    c.close()
    time.sleep(0.3)
    df = spark.read.format("phoenix-cdc").option("cdc", "c").option("safetyMarginMs", "100").load(str(db))
    assert df.columns == ["phoenix_row_timestamp", "K", "cdc_json"]
    got = sorted((r[0].replace(tzinfo=None), r[1], r[2]) for r in df.collect())
    assert got == _expected(db)
    with pytest.raises(Exception, match="reversed"):
        spark.read.format("phoenix-cdc").option("cdc", "C").option("startTime", "2024-05-29").option(
            "endTime", "2024-05-28"
        ).load(str(db)).collect()
    with pytest.raises(ChangefeedError, match="1012"):
        from changefeed.pipeline.sources.phoenix import _Options

        _Options({"path": str(db), "cdc": "NOPE"})


def _stream_cmd(db: Path, out: Path, ck: Path, *, until_idle: bool) -> list[str]:
    cmd = [PY, "-m", "changefeed.pipeline.phoenix_loop", "--db", str(db), "--cdc", "C", "--out", str(out)]
    cmd += ["--checkpoint", str(ck), "--safety-ms", "200", "--trigger-ms", "300"]
    return cmd + (["--until-idle"] if until_idle else [])


def _committed_batches(ck: Path) -> int:
    commits = ck / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def test_stream_is_exactly_once_across_kill_9(spark: SparkSession, tmp_path: Path) -> None:
    _kill_and_check(spark, tmp_path, KILLS)


@pytest.mark.slow
@pytest.mark.soak
def test_stream_survives_many_kills(spark: SparkSession, tmp_path: Path) -> None:
    _kill_and_check(spark, tmp_path, int(os.environ.get("CHANGEFEED_PHOENIX_KILLS", "5")))


def _kill_and_check(spark: SparkSession, tmp_path: Path, kills: int) -> None:
    db, out, ck = tmp_path / "db", tmp_path / "out", tmp_path / "ck"
    _setup(db)
    stop = threading.Event()
    writer = threading.Thread(target=_workload, args=(db, stop, 7))
    writer.start()
    rng = random.Random(11)
    try:
        for i in range(kills + 1):
            proc = subprocess.Popen(
                _stream_cmd(db, out, ck, until_idle=False),
                env=_env(),
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            try:
                before = _committed_batches(ck)
                deadline = time.time() + 120
                while _committed_batches(ck) < before + 1 and time.time() < deadline and proc.poll() is None:
                    time.sleep(0.2)
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                time.sleep(rng.random() * 1.5)
                if i == kills:  # then a run stopped as an operator would: SIGTERM, exit 0
                    proc.send_signal(signal.SIGTERM)
                    assert proc.wait(timeout=120) == 0, proc.stderr.read().decode() if proc.stderr else ""
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its JVM: kill -9
                proc.wait()
    finally:
        stop.set()
        writer.join()
    time.sleep(0.5)  # past the safety margin: every change is now safe to read
    final = subprocess.run(
        _stream_cmd(db, out, ck, until_idle=True), env=_env(), capture_output=True, timeout=600
    )
    assert final.returncode == 0, final.stderr.decode()[-3000:]
    got = sorted((r[0].replace(tzinfo=None), r[1], r[2]) for r in spark.read.parquet(str(out)).collect())
    want = _expected(db)
    assert len(want) > 100
    assert got == want  # every change once: none lost, none twice


def test_a_range_splits_into_bucket_and_time_slices() -> None:
    from types import SimpleNamespace

    from changefeed.pipeline.sources.phoenix import _partitions

    opts: Any = SimpleNamespace(buckets=2)
    parts = _partitions(opts, 1000, 4500)
    assert [(p.bucket, p.lo, p.hi) for p in parts] == [
        (0, 1000, 2167), (0, 2167, 3334), (0, 3334, 4500), (1, 1000, 2167), (1, 2167, 3334), (1, 3334, 4500),
    ]  # fmt: skip
    assert [(p.lo, p.hi) for p in _partitions(opts, 0, 10)] == [(0, 10), (0, 10)]
    assert _partitions(opts, 5, 5) == []
