"""CockroachDB changefeed jobs on Spark: column families (one topic per family, the same bytes as
a core changefeed), schema-change backfills, and job-wide resolved timestamps."""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

import changefeed
from changefeed.exceptions import InvalidStatement
from changefeed.feeds import jobs as J
from changefeed.testing import validators as v

pytestmark = pytest.mark.spark


def _run(db: Path, spark: Any) -> None:
    from changefeed.exceptions import PipelineError
    from changefeed.pipeline.runner import run_until_idle

    for attempt in range(3):
        try:
            run_until_idle(db, spark=spark, gc=False)
            return
        except PipelineError as exc:
            if "Python worker failed to connect back" not in str(exc) or attempt == 2:
                raise


def _data(db: Path, topic: str) -> dict[bytes, list[bytes]]:
    """Per message key, the values in topic order (resolved messages left out)."""
    out: dict[bytes, list[bytes]] = defaultdict(list)
    for _, _, k, val, _ in sorted(v.read_topic(db, topic), key=lambda r: (r[0], r[1])):
        if k is not None:
            out[k].append(val)
    return dict(out)


def _core(conn: Any, sql: str, n: int) -> list[tuple[str | None, bytes | None, bytes]]:
    """The first ``n`` data messages of a core changefeed."""
    out: list[tuple[str | None, bytes | None, bytes]] = []
    feed = conn.stream(sql)
    timer = threading.Timer(60, feed.cancel)
    timer.start()
    try:
        for m in feed:
            if m[1] is not None:
                out.append(m)
            if len(out) >= n:
                break
    finally:
        timer.cancel()
        feed.close()
    return out


def _family_workload(conn: Any, rng: random.Random, txns: int) -> None:
    for _ in range(txns):
        with conn.transaction():
            for _ in range(rng.randint(1, 3)):
                k = rng.randrange(30)
                r = rng.random()
                if r < 0.15:
                    conn.execute(f"DELETE FROM cdc_test WHERE a = {k}")
                elif r < 0.45:
                    conn.execute(f"UPSERT INTO cdc_test (a, b) VALUES ({k}, 'b{rng.randrange(100)}')")
                elif r < 0.7:
                    conn.execute(f"UPDATE cdc_test SET c = 'c{rng.randrange(100)}' WHERE a = {k}")
                else:
                    conn.execute(
                        f"UPSERT INTO cdc_test VALUES ({k}, 'b{rng.randrange(100)}', 'c{rng.randrange(100)}')"
                    )


def test_family_jobs_match_core_changefeeds(tmp_path: Path, spark: Any) -> None:
    db = tmp_path / "db"
    rng = random.Random(11)
    conn = changefeed.connect(db)
    conn.execute(
        "CREATE TABLE cdc_test (a INT PRIMARY KEY, b STRING, c STRING, FAMILY f1 (a, b), FAMILY f2 (c))"
        " WITH (uniform_partitions = 2)"
    )
    for k in range(12):
        conn.execute(f"INSERT INTO cdc_test VALUES ({k}, 'b{k}', {'NULL' if k % 3 == 0 else repr(f'c{k}')})")
    with pytest.raises(InvalidStatement, match="requires WITH split_column_families"):
        conn.execute("CREATE CHANGEFEED FOR cdc_test INTO 'topics://'")
    with pytest.raises(InvalidStatement, match="nonexistent or removed column family f9"):
        conn.execute("CREATE CHANGEFEED FOR TABLE cdc_test FAMILY f9 INTO 'topics://'")
    opts = "updated, diff, mvcc_timestamp"
    (split_job,) = conn.execute(
        f"CREATE CHANGEFEED FOR cdc_test INTO 'topics://' WITH split_column_families, {opts}"
    ).rows[0]
    (fam_job,) = conn.execute(
        "CREATE CHANGEFEED FOR TABLE cdc_test FAMILY f2 INTO 'topics://?topic_prefix=only_' "
        "WITH no_initial_scan, resolved = '1s', min_checkpoint_frequency = '1s'"
    ).rows[0]
    cursor = conn.db.last_ts()
    (cursor_job,) = conn.execute(
        "CREATE CHANGEFEED FOR cdc_test INTO 'topics://?topic_prefix=cur_' "
        f"WITH split_column_families, {opts}, cursor = '{cursor.crdb()}'"
    ).rows[0]
    _family_workload(conn, rng, 40)
    _run(db, spark)

    job = J.load_job(conn.db.conn, split_job)
    assert job.topics == ("cdc_test.f1", "cdc_test.f2") and len(job.feed_ids) == 2
    assert J.load_job(conn.db.conn, fam_job).topics == ("only_cdc_test.f2",)
    # The cursor job (no scan) equals a core changefeed from the same cursor, byte for byte.
    got = {t: _data(db, f"cur_cdc_test.{t}") for t in ("f1", "f2")}
    total = sum(len(vals) for per in got.values() for vals in per.values())
    core = _core(
        conn,
        f"EXPERIMENTAL CHANGEFEED FOR cdc_test WITH split_column_families, {opts}, cursor = '{cursor.crdb()}'",
        total,
    )
    want: dict[str, dict[bytes, list[bytes]]] = {"f1": defaultdict(list), "f2": defaultdict(list)}
    for table, key, value in core:
        assert table is not None and key is not None
        want[table.split(".")[1]][key].append(value)
    assert got == {t: dict(w) for t, w in want.items()}
    # A FAMILY target: only its family's columns, resolved messages on every partition.
    only = [orjson.loads(r[3]) for r in v.read_topic(db, "only_cdc_test.f2")]
    assert only and all(set(m) == {"resolved"} or set(m.get("after") or {"c": 0}) == {"c"} for m in only)
    assert sum("resolved" in m for m in only) >= 2
    # The split job's initial scan: the primary family of every row.
    assert len(_data(db, "cdc_test.f1")) >= 12
    for topic in ("cdc_test.f1", "cdc_test.f2", "cur_cdc_test.f1", "cur_cdc_test.f2", "only_cdc_test.f2"):
        report = v.validate_feed(db, topic)
        assert report.ok, f"{topic}: {report}"
    for jid in (split_job, fam_job, cursor_job):
        assert J.load_job(conn.db.conn, jid).status == "running"
    conn.close()


def _resolved(db: Path, topic: str) -> dict[int, list[str]]:
    """Per partition, the resolved timestamps in topic order."""
    out: dict[int, list[str]] = defaultdict(list)
    for p, _, k, val, _ in sorted(v.read_topic(db, topic), key=lambda r: (r[0], r[1])):
        if k is None:
            out[p].append(orjson.loads(val)["resolved"])
    return dict(out)


def test_multi_table_job_resolves_job_wide(tmp_path: Path, spark: Any) -> None:
    """A busy and an idle table: the idle table's topic never resolves past what the busy one's
    feed has delivered, every partition of both topics gets the same resolved timestamps, and the
    job's high water is the last of them."""
    db = tmp_path / "db"
    rng = random.Random(5)
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE busy (id INT PRIMARY KEY, v STRING) WITH (uniform_partitions = 3)")
    conn.execute("CREATE TABLE idle (id INT PRIMARY KEY, v STRING) WITH (uniform_partitions = 2)")
    conn.execute("INSERT INTO idle VALUES (1, 'one'), (2, 'two')")
    (job_id,) = conn.execute(
        "CREATE CHANGEFEED FOR busy, idle INTO 'topics://?topic_prefix=j_' "
        "WITH updated, diff, resolved = '1s', min_checkpoint_frequency = '1s'"
    ).rows[0]
    for _ in range(300):
        k = rng.randrange(50)
        if rng.random() < 0.2:
            conn.execute(f"DELETE FROM busy WHERE id = {k}")
        else:
            conn.execute(f"UPSERT INTO busy VALUES ({k}, 'v{rng.randrange(1000)}')")
    from changefeed.pipeline.runner import run_until_idle

    run_until_idle(db, spark=spark, gc=False, max_rows=40)  # the busy feed takes many micro-batches
    for topic in ("j_busy", "j_idle"):
        report = v.validate_feed(db, topic)
        assert report.ok, str(report)
    busy, idle = _resolved(db, "j_busy"), _resolved(db, "j_idle")
    assert len(busy) == 3 and len(idle) == 2
    marks = busy[0]
    assert len(marks) >= 2 and marks == sorted(marks) and len(set(marks)) == len(marks)
    assert all(seq == marks for seq in [*busy.values(), *idle.values()])
    last_busy = max(orjson.loads(r[3])["updated"] for r in v.read_topic(db, "j_busy") if r[2] is not None)
    assert marks[-1] >= last_busy
    job = J.load_job(conn.db.conn, job_id)
    assert job.high_water is not None and job.high_water.crdb() == marks[-1]
    row = conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0]
    assert row[3] == "running"
    conn.close()


def _messages(db: Path, topic: str) -> list[tuple[bytes, dict[str, Any]]]:
    """Data messages (key, decoded value) in topic order per partition, partitions in turn."""
    return [
        (k, orjson.loads(val))
        for _, _, k, val, _ in sorted(v.read_topic(db, topic), key=lambda r: (r[0], r[1]))
        if k is not None
    ]


def test_schema_change_policies(tmp_path: Path, spark: Any) -> None:
    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE foo (id INT PRIMARY KEY, v STRING) WITH (uniform_partitions = 2)")
    for k in range(20):
        conn.execute(f"INSERT INTO foo VALUES ({k}, 'v{k}')")
    jobs = {}
    for name, opts in {
        "bf": "updated, diff, resolved = '1s', min_checkpoint_frequency = '1s'",
        "nobf": "updated, schema_change_policy = 'nobackfill'",
        "stop": "updated, resolved = '1s', min_checkpoint_frequency = '1s', schema_change_policy = 'stop'",
        "cols": "updated, schema_change_events = 'column_changes'",
    }.items():
        jobs[name] = conn.execute(
            f"CREATE CHANGEFEED FOR foo INTO 'topics://?topic_prefix={name}_' WITH {opts}"
        ).rows[0][0]
    conn.execute("UPDATE foo SET v = 'x' WHERE id < 5")
    conn.execute("UPDATE foo SET v = 'y' WHERE id = 7")
    conn.execute("ALTER TABLE foo ADD COLUMN n INT DEFAULT 7")
    at = conn.db.last_ts()
    conn.execute("UPDATE foo SET n = 8, v = 'z' WHERE id = 1")
    conn.execute("DELETE FROM foo WHERE id = 2")
    conn.execute("INSERT INTO foo VALUES (100, 'new', 9)")
    conn.execute("ALTER TABLE foo ADD COLUMN m STRING")  # nullable, no default: column_changes only
    at2 = conn.db.last_ts()
    conn.execute("UPSERT INTO foo VALUES (101, 'w', 1, 'mm')")
    _run(db, spark)

    stopped = J.load_job(conn.db.conn, jobs["stop"])
    assert stopped.status == "failed"
    assert stopped.error == (
        f'shut down due to schema change and schema_change_policy="stop": schema change occurred at {at.crdb()}'
    )
    stop_msgs = _messages(db, "stop_foo")
    assert all("n" not in m["after"] for _, m in stop_msgs if m.get("after"))
    assert max(m["updated"] for _, m in stop_msgs) < at.crdb()

    bf = [m for _, m in _messages(db, "bf_foo") if m["updated"] == at.crdb()]
    # the duplicates in the old schema, then every row in the new one, at the change's timestamp
    assert len(bf) == 40
    assert sorted(m["after"]["id"] for m in bf if "n" not in m["after"]) == list(range(20))
    assert sorted(m["after"]["id"] for m in bf if m["after"].get("n") == 7) == list(range(20))
    assert {m["after"]["v"] for m in bf if m["after"]["id"] == 7} == {"y"}
    later = [m for _, m in _messages(db, "bf_foo") if m["updated"] > at.crdb()]
    assert {"id": 1, "n": 8, "v": "z"} in [m["after"] for m in later]

    nobf = [m for _, m in _messages(db, "nobf_foo") if m["updated"] == at.crdb()]
    assert len(nobf) == 20 and all("n" not in m["after"] for m in nobf)
    # column_changes: the nullable column without a default triggers a backfill too
    cols = [m["after"] for _, m in _messages(db, "cols_foo") if m["updated"] == at2.crdb()]
    assert len(cols) == 40 and sum("m" in a for a in cols) == 20
    assert not any(m["updated"] == at2.crdb() for _, m in _messages(db, "bf_foo"))
    for name in ("bf", "nobf", "stop", "cols"):
        report = v.validate_feed(db, f"{name}_foo")
        assert report.ok, f"{name}: {report}"
        assert name == "stop" or report.stats["backfill_changes"] == (2 if name == "cols" else 1)
    for name in ("bf", "nobf", "cols"):
        assert J.load_job(conn.db.conn, jobs[name]).status == "running"
    conn.close()


def test_continuous_run_backfills_and_restarts_in_the_new_schema(tmp_path: Path, spark: Any) -> None:
    """``changefeed run`` (continuous): a column added under a running query is backfilled, rows
    after it carry it (read again in the new schema until the query restarts), all validated."""
    import time

    from changefeed.pipeline.runner import run_forever

    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE foo (id INT PRIMARY KEY, v STRING)")
    for k in range(10):
        conn.execute(f"INSERT INTO foo VALUES ({k}, 'v{k}')")
    conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH updated, diff")
    stop = threading.Event()
    runner = threading.Thread(
        target=run_forever, args=(db,), kwargs={"spark": spark, "stop": stop, "install_signals": False}
    )
    runner.start()

    def wait_for(n: int) -> None:
        deadline = time.monotonic() + 120
        while len(_messages(db, "foo")) < n and time.monotonic() < deadline:
            time.sleep(0.2)

    try:
        wait_for(10)  # the initial scan
        conn.execute("UPDATE foo SET v = 'x' WHERE id = 3")
        wait_for(11)
        conn.execute("ALTER TABLE foo ADD COLUMN n INT DEFAULT 5")
        at = conn.db.last_ts()
        conn.execute("UPDATE foo SET v = 'y' WHERE id = 4")
        wait_for(11 + 20 + 1)
        time.sleep(4)  # past a poll: the runner restarts the query in the new schema
        conn.execute("UPDATE foo SET n = 6 WHERE id = 5")
        wait_for(11 + 20 + 2)
    finally:
        stop.set()
        runner.join(60)
    msgs = [m for _, m in _messages(db, "foo")]
    assert sum(m["updated"] == at.crdb() for m in msgs) == 20
    assert msgs[-2]["after"] == {"id": 4, "n": 5, "v": "y"}
    assert msgs[-1]["after"] == {"id": 5, "n": 6, "v": "v5"} and msgs[-1]["before"] == {
        "id": 5,
        "n": 5,
        "v": "v5",
    }
    report = v.validate_feed(db, "foo")
    assert report.ok, str(report)
    conn.close()


def test_a_schema_change_that_is_the_last_write_does_not_keep_the_feed_on_spark(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The backfill of an ALTER with nothing written after it is delivered once; the batches that
    then only close timestamps (at the change's position, no rows) go on the driver. They used
    to be planned as rows in the old schema, so each close went to Spark again and
    ``run --until-idle`` never returned (a node burned a Spark query a second)."""
    import logging

    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(k, f"v{k}") for k in range(50)])
    conn.execute("CREATE CHANGEFEED FOR t INTO 'topics://' WITH updated, no_initial_scan")
    _run(db, spark)
    conn.execute("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    done = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            _run(db, spark)
        except BaseException as exc:  # reported below
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(180), "run --until-idle did not return after the backfill"
    assert not failed, failed
    assert sum(len(vals) for vals in _data(db, "t").values()) == 100  # old schema, then new
    caplog.set_level(logging.INFO, logger="changefeed")
    _run(db, spark)  # closes a timestamp at the change's position: no Spark
    assert not [r for r in caplog.records if "on Spark" in r.getMessage()]
    conn.close()
