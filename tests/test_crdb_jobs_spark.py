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
