"""SQL and CQL statement semantics beyond the ScyllaDB document's examples."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from pathlib import Path

import pytest

import changefeed
from changefeed import exceptions as exc
from changefeed.engine.clock import CommitTs
from changefeed.engine.gc import NS


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000 * NS

    def now_ns(self) -> int:
        return self.now


@pytest.fixture
def sql(tmp_path: Path) -> changefeed.Connection:
    return changefeed.connect(tmp_path / "db")


def test_insert_upsert_replace_update_delete(sql: changefeed.Connection) -> None:
    sql.execute("CREATE TABLE t (id Uint64, a Utf8, b Int32, PRIMARY KEY (id))")
    sql.execute("INSERT INTO t (id, a, b) VALUES (1, 'x', 1), (2, 'y', 2)")
    sql.execute("UPSERT INTO t (id, b) VALUES (1, 10)")  # keeps a
    sql.execute("REPLACE INTO t (id, b) VALUES (2, 20)")  # a becomes NULL
    assert sql.execute("SELECT * FROM t ORDER BY id").rows == [(1, "x", 10), (2, None, 20)]
    res = sql.execute("UPDATE t SET b = b + 1 WHERE id IN (1, 3)")  # 3 does not exist: not created
    assert res.rowcount == 1
    assert sql.execute("SELECT id, b FROM t WHERE id = 1").rows == [(1, 11)]
    assert sql.execute("SELECT count(*) FROM t").rows == [(2,)]
    assert sql.execute("DELETE FROM t WHERE a IS NULL OR b > 100").rowcount == 1
    assert sql.execute("SELECT id FROM t").rows == [(1,)]


def test_transactions_commit_and_rollback(sql: changefeed.Connection) -> None:
    sql.execute("CREATE TABLE t (id Int64, v Utf8, PRIMARY KEY (id))")
    sql.execute(
        "BEGIN; UPSERT INTO t (id, v) VALUES (1, 'a'); UPSERT INTO t (id, v) VALUES (2, 'b'); ROLLBACK"
    )
    assert sql.execute("SELECT count(*) FROM t").rows == [(0,)]
    with sql.transaction():
        sql.execute("UPSERT INTO t (id, v) VALUES (1, 'a')")
        assert sql.execute("SELECT v FROM t WHERE id = 1").rows == [("a",)]  # reads its own writes
    with pytest.raises(RuntimeError), sql.transaction():
        sql.execute("UPSERT INTO t (id, v) VALUES (2, 'b')")
        raise RuntimeError("boom")
    assert sql.execute("SELECT id FROM t").rows == [(1,)]


def test_ydb_typed_literals_and_types(sql: changefeed.Connection) -> None:
    sql.execute(
        "CREATE TABLE y (k Uint64, d Date, ts Timestamp, iv Interval, dec Decimal(22,9), j Json, u Uuid, s String, f Float, "
        "PRIMARY KEY (k))"
    )
    sql.execute(
        'UPSERT INTO y (k, d, ts, iv, dec, j, u, s, f) VALUES (18446744073709551615ul, Date("2022-02-22"), '
        'Timestamp("2022-12-12T00:00:00.000000Z"), Interval("PT24H"), Decimal("1.5", 22, 9), Json(@@{"a": 1}@@), '
        'Uuid("00000000-0000-0000-0000-000000000001"), "bytes", 1.25)'.replace("@@", "'")
    )
    row = sql.execute("SELECT * FROM y").rows[0]
    assert row == (
        18446744073709551615,
        dt.date(2022, 2, 22),
        dt.datetime(2022, 12, 12, tzinfo=dt.UTC),
        dt.timedelta(hours=24),
        Decimal("1.500000000"),
        '{"a":1}',
        uuid.UUID(int=1),
        b"bytes",
        1.25,
    )


def test_cockroach_statements(sql: changefeed.Connection) -> None:
    sql.execute(
        "CREATE TABLE foo (id INT PRIMARY KEY DEFAULT unique_rowid(), name STRING, tags STRING[], t TIMESTAMPTZ)"
    )
    sql.execute("INSERT INTO foo (name) VALUES ('Carl')")
    sql.execute("INSERT INTO foo VALUES (1, 'Petee', ARRAY['a', 'b'], '2020-01-01 00:00:00+00')")
    with pytest.raises(exc.UniqueViolation):
        sql.execute("INSERT INTO foo VALUES (1, 'again', NULL, NULL)")
    sql.execute("INSERT INTO foo VALUES (1, 'again', NULL, NULL) ON CONFLICT DO NOTHING")
    rows = sql.execute("SELECT id, name, tags FROM foo WHERE name = 'Petee'").rows
    assert rows == [(1, "Petee", ["a", "b"])]
    generated = sql.execute("SELECT id FROM foo WHERE name = 'Carl'").rows[0][0]
    assert isinstance(generated, int) and generated > 1
    sql.execute("CREATE TYPE status AS ENUM ('open', 'closed')")
    sql.execute("CREATE TABLE tickets (id INT PRIMARY KEY, s status)")
    sql.execute("INSERT INTO tickets VALUES (1, 'open')")
    with pytest.raises(exc.TypeMismatch, match="enum"):
        sql.execute("INSERT INTO tickets VALUES (2, 'pending')")


def test_add_and_drop_column(sql: changefeed.Connection) -> None:
    sql.execute("CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING)")
    sql.execute("INSERT INTO office_dogs VALUES (1, 'Petee H'), (2, 'Carl')")
    sql.execute("ALTER TABLE office_dogs ADD COLUMN likes_treats BOOL DEFAULT TRUE")
    assert sql.execute("SELECT * FROM office_dogs ORDER BY id").rows == [
        (1, "Petee H", True),
        (2, "Carl", True),
    ]
    sql.execute("INSERT INTO office_dogs (id, name) VALUES (3, 'Ernie')")
    assert sql.execute("SELECT likes_treats FROM office_dogs WHERE id = 3").rows == [(True,)]
    sql.execute("ALTER TABLE office_dogs DROP COLUMN likes_treats")
    assert sql.execute("SELECT * FROM office_dogs WHERE id = 3").columns == ["id", "name"]
    with pytest.raises(exc.InvalidStatement):
        sql.execute("ALTER TABLE office_dogs DROP COLUMN id")


def test_select_features(tmp_path: Path) -> None:
    cql = changefeed.connect(tmp_path / "db", dialect="cql")
    cql.execute(
        "CREATE TABLE ks.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) WITH CLUSTERING ORDER BY (ck DESC)"
    )
    for pk in range(3):
        for ck in range(4):
            cql.execute("INSERT INTO ks.t (pk, ck, v) VALUES (?, ?, ?)", (pk, ck, f"{pk}-{ck}"))
    assert [r[1] for r in cql.execute("SELECT pk, ck FROM ks.t WHERE pk = 1").rows] == [3, 2, 1, 0]
    assert cql.execute("SELECT count(*) FROM ks.t").rows == [(12,)]
    assert cql.execute("SELECT v FROM ks.t WHERE pk IN (0, 2) AND ck >= 2 ORDER BY v LIMIT 3").rows == [
        ("0-2",),
        ("0-3",),
        ("2-2",),
    ]
    cql.execute("DELETE FROM ks.t WHERE pk = 1 AND ck >= 1 AND ck < 3")
    assert [r[0] for r in cql.execute("SELECT ck FROM ks.t WHERE pk = 1").rows] == [3, 0]


def test_ttl_expires_cells_and_rows(tmp_path: Path) -> None:
    clock = FakeClock()
    cql = changefeed.connect(tmp_path / "db", dialect="cql", clock=clock)
    cql.execute(
        "CREATE TABLE ks.t (pk int, ck int, a int, b int, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    cql.execute("INSERT INTO ks.t (pk, ck, a, b) VALUES (0, 0, 1, 1) USING TTL 10")
    cql.execute("UPDATE ks.t USING TTL 100 SET b = 2 WHERE pk = 0 AND ck = 0")
    assert cql.execute('SELECT "cdc$ttl" FROM ks.t_scylla_cdc_log').rows == [(10,), (100,)]
    clock.now += 20 * NS  # marker and a expired; b lives on and keeps the row visible
    assert cql.execute("SELECT * FROM ks.t").rows == [(0, 0, None, 2)]
    clock.now += 100 * NS
    assert cql.execute("SELECT * FROM ks.t").rows == []


def test_ttl_function_counts_down_on_the_injected_clock(tmp_path: Path) -> None:
    """``ttl(v)``: the seconds a cell's TTL has left on the database's clock, rounded up; null
    once expired, without a TTL, or rewritten without one (ScyllaDB's ``ttl()``)."""
    clock = FakeClock()
    cql = changefeed.connect(tmp_path / "db", dialect="cql", clock=clock)
    cql.execute("CREATE TABLE ks.t (pk int, ck int, a int, b int, c int, s int static, PRIMARY KEY (pk, ck))")
    cql.execute("INSERT INTO ks.t (pk, ck, a, b, c) VALUES (0, 0, 1, 1, 1) USING TTL 10")
    cql.execute("UPDATE ks.t USING TTL 100 SET b = 2, s = 5 WHERE pk = 0 AND ck = 0")
    cql.execute("UPDATE ks.t SET c = 3 WHERE pk = 0 AND ck = 0")
    q = "SELECT ttl(a), ttl(b), ttl(c), ttl(s) FROM ks.t WHERE pk = 0"
    assert cql.execute(q).rows == [(10, 100, None, 100)]
    clock.now += NS // 2
    assert cql.execute(q).rows == [(10, 100, None, 100)]
    clock.now += 20 * NS
    assert cql.execute(q).rows == [(None, 80, None, 80)]
    assert cql.execute("SELECT a, b, c FROM ks.t").rows == [(None, 2, 3)]


def test_commit_clock_forms() -> None:
    ts = CommitTs(1_532_377_312_562_986_715, 3)
    assert ts.crdb() == "1532377312562986715.0000000003"
    assert CommitTs.parse_crdb(ts.crdb()) == ts
    assert ts.ydb(562949953607163) == (1532377312562, 562949953607163)
    u = ts.timeuuid()
    assert u.version == 1 and (u.time - 0x01B21DD213814000) * 100 == ts.wall // 100 * 100
    assert CommitTs(5, 0).next(4) == CommitTs(5, 1) and CommitTs(5, 1).next(9) == CommitTs(9, 0)


def test_as_of_system_time_is_refused_clearly(sql: changefeed.Connection) -> None:
    sql.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    with pytest.raises(exc.UnsupportedFeature, match="AS OF SYSTEM TIME"):
        sql.execute("SELECT * FROM t AS OF SYSTEM TIME '-1s'")


def test_memory_database_is_the_connections_own() -> None:
    """``connect(":memory:")``, as sqlite3 reads it: a fresh database each time, gone on close
    (it made a directory named ``:memory:`` in the working directory)."""
    first = changefeed.connect(":memory:")
    first.execute("CREATE TABLE m (id INT PRIMARY KEY)")
    with changefeed.connect(":memory:") as second:
        second.execute("CREATE TABLE m (id INT PRIMARY KEY)")  # not the first one's table
    where = first.path
    assert where.is_dir() and where.name != ":memory:"
    first.close()
    assert not where.exists()
    assert not Path(":memory:").exists()
