"""CockroachDB changefeed jobs: statements, errors, state machine, protected timestamps and GC (no Spark)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.engine.gc import NS, collect_garbage
from changefeed.exceptions import (
    ChangefeedError,
    GcThresholdError,
    InvalidOption,
    InvalidStatement,
    JobNotFound,
    JobStateError,
    PermissionDenied,
    UndefinedTable,
    UnsupportedFeature,
)
from changefeed.feeds import jobs as J
from changefeed.sql.statements.crdb_jobs import SHOW_COLUMNS


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000 * NS

    def now_ns(self) -> int:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def conn(tmp_path: Path, clock: FakeClock) -> Any:
    c = changefeed.connect(tmp_path / "db", clock=clock)
    c.execute("CREATE TABLE foo (a INT PRIMARY KEY, b STRING)")
    c.execute("CREATE TABLE bar (a INT PRIMARY KEY, b STRING)")
    c.execute("INSERT INTO foo VALUES (1, 'x')")
    yield c
    c.close()


def _state(conn: Any) -> tuple[list[Any], list[Any]]:
    db = conn.db.conn
    jobs = db.execute("SELECT id, status FROM _jobs").fetchall() if J.has_table(db) else []
    feeds = db.execute("SELECT id, kind, state FROM _feeds").fetchall()
    return jobs, feeds


def _feeds(conn: Any) -> dict[int, str]:
    return dict(conn.db.conn.execute("SELECT id, state FROM _feeds").fetchall())


def test_create_returns_job_id_and_creates_job_and_feeds(conn: Any, clock: FakeClock) -> None:
    res = conn.execute(
        "CREATE CHANGEFEED FOR foo, TABLE bar INTO 'topics://?topic_prefix=p_' WITH updated, resolved = '1s', diff"
    )
    assert res.columns == ["job_id"]
    (job_id,) = res.rows[0]
    assert job_id > 1 << 60  # unique_rowid-style
    job = J.load_job(conn.db.conn, job_id)
    assert job.status == "running" and job.user_name == "root"
    assert job.description == (
        "CREATE CHANGEFEED FOR TABLE foo, TABLE bar INTO 'topics://?topic_prefix=p_' "
        "WITH OPTIONS (diff, resolved = '1s', updated)"
    )
    assert job.topics == ("p_foo", "p_bar")
    rows = conn.db.conn.execute("SELECT kind, state, spec FROM _feeds ORDER BY id").fetchall()
    assert [(k, s) for k, s, _ in rows] == [("crdb", "scanning"), ("crdb", "scanning")]
    topics = {t.name for t in changefeed.topics.TopicStore(conn.path).topics()}
    assert {"p_foo", "p_bar"} <= topics
    show = conn.execute("SHOW CHANGEFEED JOBS")
    assert show.columns == SHOW_COLUMNS
    assert [r[0] for r in show.rows] == [job_id]
    row = dict(zip(SHOW_COLUMNS, conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0], strict=True))
    assert row["status"] == "running" and row["format"] == "json"
    assert row["full_table_names"] == ["defaultdb.public.foo", "defaultdb.public.bar"]
    assert row["topics"] == "p_foo,p_bar" and row["sink_uri"] == "topics://?topic_prefix=p_"
    assert row["high_water_timestamp"] is None and row["error"] == ""


def test_cursor_skips_the_scan_and_starts_after_it(conn: Any, clock: FakeClock) -> None:
    conn.execute("ALTER TABLE foo SET (changes = true)")
    conn.execute("UPSERT INTO foo VALUES (2, 'y')")
    ts = conn.db.last_ts()
    clock.now += NS
    conn.execute("UPSERT INTO foo VALUES (3, 'z')")
    (job_id,) = conn.execute(f"CREATE CHANGEFEED FOR foo INTO 'topics://' WITH cursor = '{ts.crdb()}'").rows[
        0
    ]
    job = J.load_job(conn.db.conn, job_id)
    assert job.start == ts
    state, created_seq = conn.db.conn.execute("SELECT state, created_seq FROM _feeds").fetchone()
    assert state == "running"  # no initial scan with a cursor
    assert created_seq == _seqs(conn, "foo")[-2]  # delivers the change after the cursor only


@pytest.mark.parametrize(
    ("stmt", "exc", "text"),
    [
        ("CREATE CHANGEFEED FOR foo, foo INTO 'topics://'", InvalidStatement, "TABLE foo and TABLE foo are duplicates"),
        ("CREATE CHANGEFEED FOR nope INTO 'topics://'", UndefinedTable, 'resolve targets in the CHANGEFEED stmt: table "nope"'),
        ("CREATE CHANGEFEED FOR foo INTO 'gcpubsub://p?region=r'", UnsupportedFeature, "sink scheme gcpubsub not available yet"),
        # kafka (issue 10) is registered; its bad input is in test_kafka_sink.py
        ("CREATE CHANGEFEED FOR foo INTO 'kafka://localhost:9092?nope=1'", InvalidOption, "unknown kafka sink query parameters: [nope]"),
        # sinks (issue 8): webhook and cloud storage are registered; their bad input is in test_sinks.py
        ("CREATE CHANGEFEED FOR foo INTO 'webhook-http://h:1/p'", InvalidOption, "this sink requires webhook-https"),
        ("CREATE CHANGEFEED FOR foo INTO 'nodelocal://1/x?partition_format=x'", InvalidOption, "invalid partition_format of x"),
        ("CREATE CHANGEFEED FOR foo INTO 'bogus://x'", InvalidOption, "unsupported sink: bogus"),
        ("CREATE CHANGEFEED FOR foo INTO 'nothing'", InvalidOption, "no scheme found for sink URL"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://?x=1'", InvalidOption, "unknown topics sink query parameters: [x]"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH foo", InvalidOption, 'invalid option "foo"'),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH on_error = 'x'", InvalidOption, "unknown on_error: x, valid values are 'pause' and 'fail'"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH on_error", InvalidOption, 'option "on_error" requires a value'),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH initial_scan, no_initial_scan", InvalidOption, "cannot specify both initial_scan and no_initial_scan"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH initial_scan = 'only', updated", InvalidOption, "cannot specify both initial_scan='only' and updated"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH initial_scan = 'maybe'", InvalidOption, "unknown initial_scan: maybe"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH resolved = 'bar'", InvalidOption, 'time: invalid duration "bar"'),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH resolved = '-1s'", InvalidOption, "negative durations are not accepted: resolved='-1s'"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH end_time = '1.0000000000'", InvalidOption, "specified end time 1.0000000000 cannot be less than statement time"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH cursor = '1.0000000000'", GcThresholdError, "is older than the GC threshold"),
        ("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH format = nope", InvalidOption, "unknown format: nope"),
    ],
)  # fmt: skip
def test_bad_statements_create_nothing(conn: Any, stmt: str, exc: type[ChangefeedError], text: str) -> None:
    before = _state(conn)
    with pytest.raises(exc) as info:
        conn.execute(stmt)
    assert text in str(info.value)
    assert _state(conn) == before


def test_pause_resume_cancel_state_machine(conn: Any) -> None:
    (job_id,) = conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH no_initial_scan").rows[0]
    (fid,) = _feeds(conn)
    conn.execute(f"RESUME JOB {job_id}")  # running: nothing to do
    conn.execute(f"PAUSE JOB {job_id}")
    assert _feeds(conn)[fid] == "paused"
    conn.execute(f"PAUSE JOB {job_id}")  # paused: nothing to do
    assert conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][3] == "paused"
    conn.execute(f"RESUME JOB {job_id}")
    assert _feeds(conn)[fid] == "running"
    conn.execute(f"CANCEL JOB {job_id}")
    assert _feeds(conn)[fid] == "canceled"
    row = dict(zip(SHOW_COLUMNS, conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0], strict=True))
    assert row["status"] == "canceled" and row["finished"] is not None
    with pytest.raises(JobStateError, match="job with status canceled cannot be requested to be paused"):
        conn.execute(f"PAUSE JOB {job_id}")
    with pytest.raises(JobStateError, match="job with status canceled cannot be resumed"):
        conn.execute(f"RESUME JOB {job_id}")
    conn.execute(f"CANCEL JOB {job_id}")  # canceled: nothing to do
    with pytest.raises(JobNotFound, match="job with ID 12 does not exist"):
        conn.execute("PAUSE JOB 12")


def test_pause_with_a_live_runner_is_requested_until_the_runner_stops(conn: Any, tmp_path: Any) -> None:
    from changefeed.feeds.runners import presence, runner_live
    from changefeed.pipeline.crdb_jobs import advance

    (job_id,) = conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH no_initial_scan").rows[0]
    (fid,) = _feeds(conn)
    db = conn.db.path
    assert not runner_live(db)
    with presence(db):
        assert runner_live(db)
        conn.execute(f"PAUSE JOB {job_id}")
        assert conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][3] == "pause-requested"
        assert _feeds(conn)[fid] == "paused"  # the runner stops its query between micro-batches
        conn.execute(f"PAUSE JOB {job_id}")  # requested already: nothing to do
        with pytest.raises(JobStateError, match="job with status pause-requested cannot be resumed"):
            conn.execute(f"RESUME JOB {job_id}")
        with pytest.raises(JobStateError, match=f"job {job_id} is not paused"):
            conn.execute(f"ALTER CHANGEFEED {job_id} SET resolved")
        advance(db, running_feeds=[fid])  # its query still runs: stays requested
        assert conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][3] == "pause-requested"
        advance(db, running_feeds=[])
        assert conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0][3] == "paused"
    assert not runner_live(db)
    conn.execute(f"RESUME JOB {job_id}")
    assert _feeds(conn)[fid] == "running"


def test_resume_during_scan_goes_back_to_scanning(conn: Any) -> None:
    (job_id,) = conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://'").rows[0]
    (fid,) = _feeds(conn)
    conn.execute(f"PAUSE JOB {job_id}")
    conn.execute(f"RESUME JOB {job_id}")
    assert _feeds(conn)[fid] == "scanning"


def test_alter_changefeed(conn: Any) -> None:
    (job_id,) = conn.execute(
        "CREATE CHANGEFEED FOR foo INTO 'topics://?topic_prefix=a_' WITH updated, diff"
    ).rows[0]
    with pytest.raises(JobStateError, match=f"job {job_id} is not paused"):
        conn.execute(f"ALTER CHANGEFEED {job_id} SET resolved = '1s'")
    with pytest.raises(JobNotFound, match="could not load job with job id -1"):
        conn.execute("ALTER CHANGEFEED -1 DROP foo")
    with pytest.raises(InvalidOption, match="changefeed ID must be an INT value"):
        conn.execute("ALTER CHANGEFEED 'x' DROP foo")
    conn.execute(f"PAUSE JOB {job_id}")
    for stmt, exc, text in [
        ("DROP foo", InvalidStatement, "cannot drop all targets"),
        ("DROP bar", InvalidStatement, 'target "TABLE bar" already not watched by changefeed'),
        ("ADD baz", UndefinedTable, 'target "TABLE baz" does not exist'),
        ("SET qux = 1", InvalidOption, 'invalid option "qux"'),
        ("SET initial_scan = 'yes'", InvalidOption, 'cannot alter option "initial_scan"'),
        ("UNSET end_time", InvalidOption, 'cannot alter option "end_time"'),
        ("UNSET sink", InvalidOption, 'cannot unset option "sink"'),
        ("ADD bar WITH diff", InvalidOption, 'invalid option "diff"'),
        ("ADD bar WITH initial_scan, no_initial_scan", InvalidOption, 'cannot specify both "initial_scan" and "no_initial_scan"'),
        ("SET sink = 'bogus://x'", InvalidOption, "unsupported sink: bogus"),
    ]:  # fmt: skip
        before = _state(conn)
        with pytest.raises(exc) as info:
            conn.execute(f"ALTER CHANGEFEED {job_id} {stmt}")
        assert text in str(info.value), stmt
        assert _state(conn) == before
    conn.execute(f"ALTER CHANGEFEED {job_id} ADD bar WITH initial_scan UNSET diff SET resolved = '5s'")
    job = J.load_job(conn.db.conn, job_id)
    assert job.description == (
        "CREATE CHANGEFEED FOR TABLE foo, TABLE bar INTO 'topics://?topic_prefix=a_' "
        "WITH OPTIONS (resolved = '5s', updated)"
    )
    assert job.topics == ("a_foo", "a_bar")
    assert sorted(_feeds(conn).values()) == ["paused", "paused"]
    conn.execute(f"ALTER CHANGEFEED {job_id} DROP foo")
    conn.execute(f"RESUME JOB {job_id}")
    assert sorted(_feeds(conn).values()) == ["canceled", "scanning"]
    assert J.load_job(conn.db.conn, job_id).topics == ("a_bar",)


def test_job_control_needs_owner_or_admin(tmp_path: Path, conn: Any) -> None:
    conn.execute("CREATE USER alice")
    conn.execute("CREATE USER bob")
    conn.execute("GRANT CHANGEFEED ON TABLE foo TO alice")
    alice = changefeed.connect(conn.path, user="alice")
    bob = changefeed.connect(conn.path, user="bob")
    with pytest.raises(PermissionDenied, match="requires the CHANGEFEED privilege on all target tables"):
        bob.execute("CREATE CHANGEFEED FOR foo INTO 'topics://'")
    (job_id,) = alice.execute("CREATE CHANGEFEED FOR foo INTO 'topics://'").rows[0]
    with pytest.raises(PermissionDenied, match=f"user bob does not have privileges for job {job_id}"):
        bob.execute(f"PAUSE JOB {job_id}")
    assert bob.execute("SHOW CHANGEFEED JOBS").rows == []
    alice.execute(f"PAUSE JOB {job_id}")
    conn.execute(f"RESUME JOB {job_id}")  # root is an admin
    alice.close()
    bob.close()


def _set_progress(conn: Any, feed_id: int, seq: int) -> None:
    conn.db.conn.execute(
        "INSERT INTO _progress VALUES (?, ?, 0, 0, 0, NULL) ON CONFLICT (feed_id) DO UPDATE SET seq = excluded.seq",
        (feed_id, seq),
    )


def _seqs(conn: Any, table: str) -> list[int]:
    schema = conn.db.find_table(table)
    return [r[0] for r in conn.db.conn.execute(f"SELECT seq FROM x{schema.id} ORDER BY seq")]


def test_jobs_protect_the_journal_until_cancelled(conn: Any, clock: FakeClock) -> None:
    (job_id,) = conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH no_initial_scan").rows[0]
    (fid,) = _feeds(conn)
    for i in range(10, 16):
        conn.execute(f"UPSERT INTO foo VALUES ({i}, 'v')")
    clock.now += 5 * 3600 * NS  # past CockroachDB's default gc.ttlseconds (14,400 s)
    # nothing delivered: all protected but the row written before the job (seq 1)
    assert collect_garbage(conn.db).change_rows == 1
    _set_progress(conn, fid, 3)
    assert collect_garbage(conn.db).change_rows == 2
    assert _seqs(conn, "foo") == [4, 5, 6, 7]
    conn.execute(f"PAUSE JOB {job_id}")  # paused jobs keep protecting
    clock.now += 5 * 3600 * NS
    assert collect_garbage(conn.db).change_rows == 0
    threshold = conn.db.conn.execute("SELECT value FROM _meta WHERE key LIKE 'gc_threshold:%'").fetchone()[0]
    with pytest.raises(GcThresholdError, match="older than the GC threshold"):
        conn.execute(
            "CREATE CHANGEFEED FOR foo INTO 'topics://' WITH cursor = '1700000000000000000.0000000000'"
        )
    # At the threshold is fine; the new job protects what follows its cursor.
    (job2,) = conn.execute(f"CREATE CHANGEFEED FOR foo INTO 'topics://' WITH cursor = '{threshold}'").rows[0]
    conn.execute(f"CANCEL JOB {job_id}")  # releases its protection, the other job still protects
    assert collect_garbage(conn.db).change_rows == 0
    conn.execute(f"CANCEL JOB {job2}")
    assert collect_garbage(conn.db).change_rows == 4


def test_history_is_kept_for_gc_ttl_without_a_changefeed(conn: Any, clock: FakeClock) -> None:
    """A CockroachDB table keeps its change history from its creation for gc.ttlseconds
    (CockroachDB's default 14,400 s when unset), feed or no feed: a cursor before the first
    changefeed works, until GC passes it."""
    start = conn.db.last_ts()  # the fixture's insert into foo
    conn.execute("UPSERT INTO foo VALUES (2, 'y')")
    clock.now += 3 * 3600 * NS
    assert collect_garbage(conn.db).change_rows == 0  # younger than 4 hours: kept
    (job_id,) = conn.execute(
        f"CREATE CHANGEFEED FOR foo INTO 'topics://' WITH cursor = '{start.crdb()}'"
    ).rows[0]
    assert _feeds(conn) and J.load_job(conn.db.conn, job_id).start == start
    conn.execute(f"CANCEL JOB {job_id}")
    clock.now += 2 * 3600 * NS
    assert collect_garbage(conn.db).change_rows == 2  # now older than gc.ttlseconds
    with pytest.raises(GcThresholdError, match="older than the GC threshold"):
        conn.execute(f"CREATE CHANGEFEED FOR foo INTO 'topics://' WITH cursor = '{start.crdb()}'")
    with pytest.raises(GcThresholdError, match="older than the GC threshold"):
        conn.stream(f"CREATE CHANGEFEED FOR foo WITH cursor = '{start.crdb()}'")
    # a table created WITH (changes = false) keeps no history until a changefeed exists
    conn.execute("CREATE TABLE nohist (a INT PRIMARY KEY) WITH (changes = false)")
    before = conn.db.last_ts()
    conn.execute("INSERT INTO nohist VALUES (1)")
    with pytest.raises(GcThresholdError):
        conn.execute(f"CREATE CHANGEFEED FOR nohist INTO 'topics://' WITH cursor = '{before.crdb()}'")


def test_gc_ttlseconds_keeps_recent_rows(conn: Any, clock: FakeClock) -> None:
    conn.execute("ALTER TABLE foo CONFIGURE ZONE USING gc.ttlseconds = 600")
    conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH no_initial_scan")
    (fid,) = _feeds(conn)
    conn.execute("UPSERT INTO foo VALUES (10, 'old')")
    clock.now += 500 * NS
    conn.execute("UPSERT INTO foo VALUES (11, 'new')")
    _set_progress(conn, fid, 3)  # both delivered (seq 1: the fixture's row, before the job)
    clock.now += 200 * NS  # the first two are 700 s old, the last 200 s
    assert collect_garbage(conn.db, min_age=0).change_rows == 2
    assert _seqs(conn, "foo") == [3]
    with pytest.raises(InvalidOption, match=r"GC\.TTLSeconds 0 less than minimum allowed 1"):
        conn.execute("ALTER TABLE foo CONFIGURE ZONE USING gc.ttlseconds = 0")
    with pytest.raises(InvalidOption, match=r'unsupported zone config parameter: "foo\.bar"'):
        conn.execute("ALTER TABLE foo CONFIGURE ZONE USING foo.bar = 1")


def test_high_water_shows_as_decimal_and_timestamptz(conn: Any) -> None:
    (job_id,) = conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH no_initial_scan").rows[0]
    job = J.load_job(conn.db.conn, job_id)
    ts = changefeed.engine.clock.CommitTs(1_700_000_000_123_456_789, 3)
    from dataclasses import replace

    J.save_job(conn.db.conn, replace(job, high_water=ts))
    row = dict(zip(SHOW_COLUMNS, conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0], strict=True))
    assert row["high_water_timestamp"] == Decimal("1700000000123456789.0000000003")
    assert row["readable_high_water_timestamptz"].isoformat() == "2023-11-14T22:13:20.123456+00:00"
    assert J.hlc_string(ts) == "1700000000.123456789,3"


def test_on_error_pause_and_fail(conn: Any) -> None:
    from changefeed.pipeline import crdb_jobs

    (pausing,) = conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH on_error = 'pause'").rows[0]
    (failing,) = conn.execute("CREATE CHANGEFEED FOR bar INTO 'topics://'").rows[0]
    p_feed = J.load_job(conn.db.conn, pausing).feed_ids[0]
    f_feed = J.load_job(conn.db.conn, failing).feed_ids[0]
    assert crdb_jobs.record_failure(conn.path, p_feed, "boom")
    assert crdb_jobs.record_failure(conn.path, f_feed, "bang")
    assert not crdb_jobs.record_failure(conn.path, 10**6, "not a job's feed")
    with changefeed.connect(conn.path) as c:
        paused = J.load_job(c.db.conn, pausing)
        assert paused.status == "paused"
        assert paused.error == "job failed (boom) but is being paused because of on_error=pause"
        failed = J.load_job(c.db.conn, failing)
        assert failed.status == "failed" and failed.error == "bang" and failed.finished is not None
        assert _feeds(c) == {p_feed: "paused", f_feed: "failed"}
        c.execute(f"RESUME JOB {pausing}")
        assert J.load_job(c.db.conn, pausing).status == "running"
        shown = c.execute("SHOW JOBS")
        assert shown.columns[:2] == ["job_id", "job_type"] and {r[1] for r in shown.rows} == {"CHANGEFEED"}


def test_dropping_a_watched_table_fails_the_job(conn: Any) -> None:
    (job_id,) = conn.execute("CREATE CHANGEFEED FOR foo, bar INTO 'topics://'").rows[0]
    conn.execute("DROP TABLE bar")
    job = J.load_job(conn.db.conn, job_id)
    assert job.status == "failed" and job.error == '"bar" was dropped'
