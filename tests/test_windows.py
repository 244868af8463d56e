"""Window functions in the SQL dialect, beyond what the PostgreSQL oracle test compares
(``tests/test_pg_oracle.py``): CockroachDB's NULL order inside a window, the column types a
client is told, running frames against the frame folded row by row, and the refusals."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.exceptions import GroupingError, UnsupportedFeature, WindowingError, WrongObjectType


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Connection]:
    with changefeed.connect(tmp_path / "db") as c:
        c.execute("CREATE TABLE w (id INT PRIMARY KEY, g STRING, n INT)")
        c.execute("INSERT INTO w VALUES (1, 'a', 10), (2, 'a', NULL), (3, 'b', 30), (4, 'a', 5)")
        yield c


def rows(conn: Connection, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in conn.execute(sql).rows]


def test_nulls_sort_first_in_a_window_as_in_cockroachdb(conn: Connection) -> None:
    got = rows(conn, "SELECT id, row_number() OVER (ORDER BY n) FROM w ORDER BY id")
    assert got == [(1, 3), (2, 1), (3, 4), (4, 2)]
    got = rows(conn, "SELECT id, row_number() OVER (ORDER BY n NULLS LAST) FROM w ORDER BY id")
    assert got == [(1, 2), (2, 4), (3, 3), (4, 1)]


def test_labels_and_types(conn: Connection) -> None:
    res = conn.execute(
        "SELECT row_number() OVER (), rank() OVER (ORDER BY id) AS r, cume_dist() OVER (),"
        " lag(g) OVER (ORDER BY id) FROM w"
    )
    assert res.columns == ["row_number", "r", "cume_dist", "lag"]
    assert [t.name if t is not None else None for t in res.types] == ["INT8", "INT8", "FLOAT8", "STRING"]


def test_windows_over_groups(conn: Connection) -> None:
    got = rows(
        conn,
        "SELECT g, count(*), rank() OVER (ORDER BY count(*) DESC), sum(count(*)) OVER () FROM w GROUP BY g ORDER BY g",
    )
    assert got == [("a", 3, 1, 4), ("b", 1, 2, 4)]


def test_window_values_in_order_by_and_limit(conn: Connection) -> None:
    got = rows(conn, "SELECT id, sum(n) OVER (PARTITION BY g) AS s FROM w ORDER BY s DESC, id LIMIT 2")
    assert got == [(3, 30), (1, 15)]


def test_running_frames_agree_with_each_frame_folded(tmp_path: Path) -> None:
    """The one-pass running total against the same frames written so that each is folded on its
    own (``ROWS BETWEEN UNBOUNDED PRECEDING AND 0 FOLLOWING`` is not the default frame's peers)."""
    rnd = random.Random(7)
    with changefeed.connect(tmp_path / "r") as c:
        c.execute("CREATE TABLE r (id INT PRIMARY KEY, g INT, n INT, f FLOAT8)")
        data = [
            (
                i,
                rnd.randrange(4),
                rnd.choice([None, rnd.randrange(-50, 50)]),
                rnd.choice([None, rnd.random()]),
            )
            for i in range(300)
        ]
        c.executemany("INSERT INTO r VALUES ($1, $2, $3, $4)", data)
        for agg in ("count(n)", "sum(n)", "avg(n)", "min(n)", "max(f)", "sum(f)", "count(*)"):
            running = rows(c, f"SELECT id, {agg} OVER (PARTITION BY g ORDER BY n, id) FROM r ORDER BY id")
            folded = rows(
                c,
                f"SELECT id, {agg} OVER (PARTITION BY g ORDER BY n, id ROWS BETWEEN UNBOUNDED PRECEDING"
                " AND CURRENT ROW) FROM r ORDER BY id",
            )
            assert running == folded, agg
        expect = {}
        for g in range(4):
            total = None
            for i, _, n, _ in sorted((d for d in data if d[1] == g), key=lambda d: d[0]):
                if n is not None:
                    total = n if total is None else total + n
                expect[i] = total
        got = rows(c, "SELECT id, sum(n) OVER (PARTITION BY g ORDER BY id) FROM r ORDER BY id")
        assert got == sorted(expect.items())


def test_refusals(conn: Connection) -> None:
    with pytest.raises(WindowingError, match="not allowed in WHERE"):
        conn.execute("SELECT id FROM w WHERE rank() OVER (ORDER BY id) = 1")
    with pytest.raises(WindowingError, match="not allowed in HAVING"):
        conn.execute("SELECT count(*) FROM w HAVING sum(n) OVER () > 1")
    with pytest.raises(WrongObjectType, match="requires an OVER clause"):
        conn.execute("SELECT lag(n) FROM w")
    with pytest.raises(GroupingError, match='column "n" must appear in the GROUP BY clause'):
        conn.execute("SELECT g, sum(n) OVER () FROM w GROUP BY g")
    with pytest.raises(UnsupportedFeature, match="RANGE with offset"):
        conn.execute("SELECT sum(n) OVER (ORDER BY n RANGE BETWEEN 5 PRECEDING AND CURRENT ROW) FROM w")
    with pytest.raises(WindowingError, match="not allowed here"):
        conn.execute("UPDATE w SET n = row_number() OVER () WHERE id = 1")
    assert rows(conn, "SELECT n FROM w WHERE id = 1") == [(10,)]
