"""SELECT fast paths: LIMIT stops the scan early, ``SELECT *`` skips per-row evaluation; the
results are the same as the general path's."""

from __future__ import annotations

from pathlib import Path

import pytest

import changefeed
from changefeed import exceptions as exc


@pytest.fixture
def sql(tmp_path: Path) -> changefeed.Connection:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (id Int64, a Utf8, b Int32, PRIMARY KEY (id))")
    conn.execute("UPSERT INTO t (id, a, b) VALUES (3, 'c', NULL), (1, 'a', 10), (2, NULL, 20), (4, 'd', 40)")
    return conn


def test_limit_without_order_stops_early_and_keeps_key_order(sql: changefeed.Connection) -> None:
    assert sql.execute("SELECT * FROM t LIMIT 2").rows == [(1, "a", 10), (2, None, 20)]
    assert sql.execute("SELECT id FROM t WHERE b IS NULL LIMIT 5").rows == [(3,)]
    assert sql.execute("SELECT * FROM t LIMIT 0").rows == []
    res = sql.execute("SELECT id FROM t WHERE b > 5 LIMIT 2")
    assert res.rows == [(1,), (2,)] and res.rowcount == 2


def test_order_by_with_limit_sorts_all_rows_first(sql: changefeed.Connection) -> None:
    assert sql.execute("SELECT id FROM t ORDER BY id DESC LIMIT 2").rows == [(4,), (3,)]
    assert sql.execute("SELECT DISTINCT a IS NULL FROM t LIMIT 1").rows == [(False,)]
    assert sql.execute("SELECT count(*) FROM t LIMIT 1").rows == [(4,)]


def test_projections_with_expressions_and_nulls(sql: changefeed.Connection) -> None:
    rows = sql.execute("SELECT id, b + 1, a FROM t WHERE id >= 2 LIMIT 2").rows
    assert rows == [(2, 21, None), (3, None, "c")]
    assert sql.execute("SELECT *, id FROM t WHERE id = 1").rows == [(1, "a", 10, 1)]
    assert sql.execute("SELECT * FROM t WHERE id = 9").rows == []


def test_bad_limit_is_refused(sql: changefeed.Connection) -> None:
    with pytest.raises(exc.InvalidArgument, match="LIMIT must not be negative") as e:
        sql.execute("SELECT * FROM t LIMIT -1")
    assert e.value.code == "2201W"  # PostgreSQL's
    with pytest.raises(exc.InvalidStatement, match="LIMIT must be a non-negative integer"):
        sql.execute("SELECT * FROM t LIMIT 'x'")


def test_cql_star_order_and_log_relation_with_limit(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "cql", dialect="cql") as cql:
        cql.execute(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        cql.execute(
            "CREATE TABLE ks.t (p int, c int, z text, a bigint, PRIMARY KEY (p, c)) WITH cdc = {'enabled': true}"
        )
        for i in range(5):
            cql.execute(f"INSERT INTO ks.t (p, c, z, a) VALUES (1, {i}, 'z{i}', {i * 10})")
        res = cql.execute("SELECT * FROM ks.t LIMIT 2")
        assert res.columns == ["p", "c", "a", "z"]
        assert res.rows == [(1, 0, 0, "z0"), (1, 1, 10, "z1")]
        full = cql.execute("SELECT * FROM ks.t_scylla_cdc_log").rows
        assert len(full) == 5
        assert cql.execute("SELECT * FROM ks.t_scylla_cdc_log LIMIT 2").rows == full[:2]
