"""A job's small micro-batches are read and encoded on the driver (``job.DRIVER_ENCODE_ROWS``):
the topics get the same records, byte for byte, as when every batch is a Spark job."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.pipeline.stream import query as job
from changefeed.testing import validators as v
from changefeed.topics import TopicStore

pytestmark = pytest.mark.spark

COLUMNS = """k INT PRIMARY KEY, s STRING, f FLOAT, d DECIMAL(10,2), tz TIMESTAMPTZ, dt DATE, bs BYTES,
  j JSONB, ai INT[], bo BOOL, u UUID, iv INTERVAL"""
TABLES = {
    "t": f"CREATE TABLE t ({COLUMNS}) WITH (uniform_partitions = 3)",
    "tf": f"CREATE TABLE tf ({COLUMNS}, FAMILY main (k, s, f, d, tz, dt, bs, j), FAMILY other (ai, bo, u, iv))",
}
JOBS = {
    "w_": (
        "t",
        "updated, diff, mvcc_timestamp, key_in_value, resolved = '1s', min_checkpoint_frequency = '1s'",
    ),
    "r_": ("t", "envelope = 'row'"),
    "fam_": ("tf", "split_column_families, updated, diff"),
}


def _workload(conn: Any, table: str) -> None:
    """Inserts, updates of either family and deletes, in transactions of one to three rows."""
    for i in range(12):
        conn.execute(
            f"INSERT INTO {table} VALUES ({i}, 'é\"\\n{i}', {i / 7}, {i}.25, '2024-01-0{1 + i % 9} 03:04:05.5+00', "
            f"'2024-02-0{1 + i % 9}', x'0{i % 10}ff', '{{\"b\": {i}, \"a\": [1, null]}}', ARRAY[{i}, NULL], "
            f"{'true' if i % 2 else 'false'}, '8c5b9c8e-0000-4000-8000-00000000000{i % 10}', '{i} hours')"
        )
    with conn.transaction():
        conn.execute(f"UPDATE {table} SET s = NULL, f = '-Infinity' WHERE k = 0")  # (NaN is refused)
        conn.execute(f"UPDATE {table} SET bo = NULL WHERE k = 1")
    conn.execute(f"UPDATE {table} SET f = 1e21, j = '[]' WHERE k = 2")
    with conn.transaction():
        conn.execute(f"DELETE FROM {table} WHERE k = 3")
        conn.execute(f"UPSERT INTO {table} (k, s) VALUES (4, 'up')")
        conn.execute(f"UPDATE {table} SET iv = '1 day' WHERE k = 5")


def _run(db: Path, spark: Any) -> None:
    """``run_until_idle`` in micro-batches of about four rows; repeated when a loaded machine makes
    Spark time out starting a Python worker (safe: delivery is exactly once)."""
    from changefeed.exceptions import PipelineError
    from changefeed.pipeline.runner import run_until_idle

    for attempt in range(3):
        try:
            run_until_idle(db, spark=spark, gc=False, max_rows=4)
            return
        except PipelineError as exc:
            if "Python worker failed to connect back" not in str(exc) or attempt == 2:
                raise


def _data(db: Path) -> dict[str, list[tuple[int, bytes | None, bytes, int]]]:
    """Every data record (resolved ones carry the run's own clock) of every job's topic."""
    topics = [t.name for t in TopicStore(db).topics()]
    return {
        t: [(p, k, val, ts) for p, _, k, val, ts in v.read_topic(db, t) if k is not None]
        for t in sorted(topics)
    }


def test_driver_encoded_batches_match_spark(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "db"
    conn = changefeed.connect(db)
    for ddl in TABLES.values():
        conn.execute(ddl)
    for prefix, (table, options) in JOBS.items():
        conn.execute(f"CREATE CHANGEFEED FOR {table} INTO 'topics://?topic_prefix={prefix}' WITH {options}")
    for table in TABLES:
        _workload(conn, table)
    conn.close()
    spark_db = tmp_path / "spark"
    shutil.copytree(db, spark_db)

    calls: list[int] = []
    encode = job.encode_on_driver

    def counted(*args: Any) -> Any:
        calls.append(1)
        return encode(*args)

    monkeypatch.setattr(job, "encode_on_driver", counted)
    _run(db, spark)  # every micro-batch of at most max_rows=4 rows on the driver
    assert len(calls) >= 3 * len(JOBS)
    monkeypatch.setattr(job, "DRIVER_ENCODE_ROWS", 0)
    calls.clear()
    _run(spark_db, spark)
    assert calls == []

    got, want = _data(db), _data(spark_db)
    assert set(got) == {"w_t", "r_t", "fam_tf.main", "fam_tf.other"}
    assert all(want[t] for t in want)
    assert got == want
    values = [val for _, _, val, _ in got["w_t"]]
    assert any(b'"before": {' in x and b'"mvcc_timestamp": "' in x for x in values)
    assert any(x.startswith(b'{"after": null') for x in values)  # the delete
