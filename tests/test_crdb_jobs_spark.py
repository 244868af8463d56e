"""CockroachDB changefeed jobs on Spark: delivery validated with the cdctest-style validators,
pause/resume, cursor, end_time, initial_scan='only'."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.feeds import jobs as J
from changefeed.testing import validators as v

pytestmark = pytest.mark.spark


def _workload(conn: Any, rng: random.Random, txns: int, keys: int = 40) -> None:
    for _ in range(txns):
        with conn.transaction():
            for _ in range(rng.randint(1, 3)):
                k = rng.randrange(keys)
                if rng.random() < 0.15:
                    conn.execute(f"DELETE FROM foo WHERE id = {k}")
                else:
                    conn.execute(f"UPSERT INTO foo VALUES ({k}, 'v{rng.randrange(1000)}')")


def _run(db: Path, spark: Any) -> None:
    """``run_until_idle``; on a loaded machine Spark may time out starting a Python worker: the run
    is repeated then (safe: delivery is exactly once, and the validators would see a duplicate)."""
    from changefeed.exceptions import PipelineError
    from changefeed.pipeline.runner import run_until_idle

    for attempt in range(3):
        try:
            run_until_idle(db, spark=spark, gc=False)
            return
        except PipelineError as exc:
            if "Python worker failed to connect back" not in str(exc) or attempt == 2:
                raise


def _job(conn: Any, job_id: int) -> J.Job:
    return J.load_job(conn.db.conn, job_id)


def _topic_size(db: Path, topic: str) -> int:
    return len(v.read_topic(db, topic))


def test_job_delivers_validates_pauses_and_finishes(tmp_path: Path, spark: Any) -> None:
    db = tmp_path / "db"
    rng = random.Random(7)
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE foo (id INT PRIMARY KEY, v STRING) WITH (uniform_partitions = 3)")
    for k in range(20):
        conn.execute(f"INSERT INTO foo VALUES ({k}, 'init{k}')")
    (main_job,) = conn.execute(
        "CREATE CHANGEFEED FOR TABLE foo INTO 'topics://?topic_prefix=cdc_' "
        "WITH updated, resolved = '1s', min_checkpoint_frequency = '1s', diff"
    ).rows[0]
    (scan_job,) = conn.execute(
        "CREATE CHANGEFEED FOR foo INTO 'topics://?topic_prefix=scan_' WITH initial_scan = 'only'"
    ).rows[0]
    _workload(conn, rng, 60)
    cursor = conn.db.last_ts()
    _workload(conn, rng, 20)
    (cursor_job,) = conn.execute(
        f"CREATE CHANGEFEED FOR foo INTO 'topics://?topic_prefix=cur_' WITH updated, cursor = '{cursor.crdb()}'"
    ).rows[0]
    end = J.parse_crdb_time(str(time.time_ns() + 1_000_000_000), cursor, option="end_time")
    (end_job,) = conn.execute(
        f"CREATE CHANGEFEED FOR foo INTO 'topics://?topic_prefix=end_' WITH updated, end_time = '{end.crdb()}'"
    ).rows[0]
    _workload(conn, rng, 10)
    while time.time_ns() <= end.wall:
        time.sleep(0.05)
    _workload(conn, rng, 10)  # after end_time: the end_time job never sees these

    _run(db, spark)

    report = v.validate_feed(db, "cdc_foo")
    assert report.ok, str(report)
    assert report.stats["resolved_records"] >= 3  # one per partition at least
    job = _job(conn, main_job)
    assert job.status == "running" and job.high_water is not None
    assert job.running_status == f"running: resolved={J.hlc_string(job.high_water)}"

    scan = _job(conn, scan_job)
    assert scan.status == "succeeded"
    snapshot = v.read_topic(db, "scan_foo")
    assert len(snapshot) == 20  # the rows at creation, nothing else

    report = v.validate_feed(db, "cur_foo")  # exactly the changes after the cursor
    assert report.ok, str(report)
    assert report.stats["data_records"] == report.stats["change_rows"]
    assert _job(conn, cursor_job).start == cursor

    finished = _job(conn, end_job)
    assert finished.status == "succeeded" and finished.high_water == end
    latest = max(
        J.parse_crdb_time(str(orjson_loads(r[3])["updated"]), end, option="x")
        for r in v.read_topic(db, "end_foo")
    )
    assert latest <= end

    # PAUSE stops delivery, RESUME continues exactly once.
    conn.execute(f"PAUSE JOB {main_job}")
    before = _topic_size(db, "cdc_foo")
    _workload(conn, rng, 15)
    _run(db, spark)
    assert _topic_size(db, "cdc_foo") == before
    conn.execute(f"RESUME JOB {main_job}")
    _run(db, spark)
    report = v.validate_feed(db, "cdc_foo")
    assert report.ok, str(report)
    assert conn.execute(f"SHOW CHANGEFEED JOB {main_job}").rows[0][3] == "running"
    conn.execute(f"CANCEL JOB {main_job}")
    conn.close()


def orjson_loads(b: bytes) -> Any:
    import orjson

    return orjson.loads(b)


def test_python_chunk_tasks_write_what_the_spark_face_writes(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The initial scan and a schema change's backfill passes are read, encoded (the encoder's
    column-wise face, ``encode_batch``) and appended by Python tasks; with that face hidden they
    go through the JVM (``encode_spark``). Both give the very same records, in the same order per
    key."""
    import shutil

    from changefeed.formats.crdb_json import CrdbJsonEncoder
    from changefeed.pipeline.snapshot import chunks

    monkeypatch.setattr(chunks, "CHUNK_ROWS", 9)  # several chunks per pass
    db = tmp_path / "db"
    rng = random.Random(11)
    conn = changefeed.connect(db)
    conn.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, s STRING, f FLOAT, d DECIMAL(10, 3), b BOOL, "
        "ts TIMESTAMPTZ, bs BYTES, j JSONB, a INT[]) WITH (uniform_partitions = 3)"
    )
    floats = [0.0, -0.0, 250000.0, 1e21, 1.5e-7, 12345678.5, 1234567890123456.7, 0.1, -2.5]
    texts = ["plain", 'quo"te', "back\\slash", "tab\there", "nl\nx", "é ünï", "\x01ctl", ""]
    for k in range(40):
        conn.execute(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                k,
                None if k % 7 == 3 else rng.choice(texts) + str(k),
                None if k % 5 == 4 else rng.choice(floats) * (k + 1),
                None if k % 6 == 5 else f"{rng.randrange(-(10**6), 10**6) / 1000:.3f}",
                None if k % 4 == 3 else k % 2 == 0,
                "2026-11-23 10:00:00.123456+00" if k % 3 else None,
                bytes([k, 0, 255]) if k % 2 else None,
                f'{{"k": {k}, "x": [1, "two"]}}' if k % 3 else None,
                [k, -k] if k % 4 else None,
            ),
        )
    conn.execute("CREATE CHANGEFEED FOR t INTO 'topics://' WITH updated, diff, initial_scan = 'yes'")
    for k in range(0, 40, 3):
        conn.execute(f"UPSERT INTO t (id, s, f) VALUES ({k}, 'after{k}', {k / 8})")
    conn.execute("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    conn.execute("DELETE FROM t WHERE id IN (5, 6)")
    conn.close()
    other = tmp_path / "jvm"
    shutil.copytree(db, other)

    _run(db, spark)
    from changefeed.pipeline.snapshot import scan
    from changefeed.pipeline.stream import query

    monkeypatch.delattr(CrdbJsonEncoder, "encode_batch")
    monkeypatch.setattr(query, "DRIVER_ENCODE_ROWS", 0)  # the JVM face: every batch and scan on Spark
    monkeypatch.setattr(scan, "DRIVER_SCAN_ROWS", 0)
    _run(other, spark)

    def per_key(records: list[tuple[int, int, bytes | None, bytes, int]]) -> dict[Any, list[Any]]:
        # chunk tasks append concurrently: a partition's order is fixed per key, not across keys
        out: dict[Any, list[Any]] = {}
        for partition, _, key, value, ts in records:
            out.setdefault((partition, key), []).append((value, ts))
        return out

    python_face, jvm_face = v.read_topic(db, "t"), v.read_topic(other, "t")
    assert len(python_face) == 40 + 14 + 2 * 40 + 2  # scan, updates, two backfill passes, deletes
    assert per_key(python_face) == per_key(jvm_face)
