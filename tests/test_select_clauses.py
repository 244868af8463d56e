"""SELECT clauses clients and BI tools send: OFFSET, CASE, table aliases, HAVING, ORDER BY a
position, NULLS FIRST/LAST (CockroachDB's semantics: NULLs sort first ascending)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.exceptions import ChangefeedError, InvalidColumnReference


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Connection]:
    with changefeed.connect(tmp_path / "db") as c:
        c.execute("CREATE TABLE u (id INT PRIMARY KEY, s STRING, n INT)")
        c.execute("INSERT INTO u VALUES (1, 'a', 10), (2, 'b', 20), (3, NULL, 30), (4, 'a', 5)")
        yield c


def rows(conn: Connection, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in conn.execute(sql).rows]


def test_offset(conn: Connection) -> None:
    assert rows(conn, "SELECT id FROM u ORDER BY id LIMIT 2 OFFSET 1") == [(2,), (3,)]
    assert rows(conn, "SELECT id FROM u ORDER BY id OFFSET 3") == [(4,)]
    assert rows(conn, "SELECT id FROM u ORDER BY id OFFSET 2 ROWS") == [(3,), (4,)]
    assert rows(conn, "SELECT id FROM u OFFSET 9") == []
    assert rows(conn, "SELECT id FROM u LIMIT 2 OFFSET 1") == [(2,), (3,)]  # the scan's order
    with pytest.raises(ChangefeedError, match="OFFSET must be a non-negative integer"):
        conn.execute("SELECT id FROM u OFFSET -1")


def test_case(conn: Connection) -> None:
    got = rows(
        conn,
        "SELECT id, CASE WHEN n > 15 THEN 'big' WHEN n > 7 THEN 'mid' ELSE 'small' END FROM u ORDER BY id",
    )
    assert got == [(1, "mid"), (2, "big"), (3, "big"), (4, "small")]
    got = rows(conn, "SELECT CASE s WHEN 'a' THEN 1 WHEN 'b' THEN 2 END AS k FROM u ORDER BY id")
    assert got == [(1,), (2,), (None,), (1,)]  # NULL matches no WHEN, and there is no ELSE
    assert rows(conn, "SELECT sum(CASE WHEN s = 'a' THEN n ELSE 0 END) FROM u") == [(15,)]
    assert rows(conn, "SELECT id FROM u WHERE CASE WHEN s IS NULL THEN true ELSE false END") == [(3,)]


def test_table_alias(conn: Connection) -> None:
    assert rows(conn, "SELECT a.id FROM u AS a WHERE a.n > 10 ORDER BY a.id") == [(2,), (3,)]
    assert rows(conn, "SELECT x.s FROM u x WHERE x.id = 1") == [("a",)]


def test_having_and_aggregates_in_expressions(conn: Connection) -> None:
    assert rows(conn, "SELECT s, sum(n) FROM u GROUP BY s HAVING sum(n) > 14 ORDER BY s") == [
        (None, 30),
        ("a", 15),
        ("b", 20),
    ]
    assert rows(conn, "SELECT s FROM u GROUP BY s HAVING count(*) > 1") == [("a",)]
    assert rows(conn, "SELECT sum(n) * 2, max(n) - min(n) FROM u") == [(130, 25)]
    assert rows(conn, "SELECT count(*) FROM u HAVING count(*) > 10") == []
    assert rows(conn, "SELECT count(*) FROM u WHERE id > 100") == [(0,)]
    with pytest.raises(ChangefeedError) as err:
        conn.execute("SELECT s FROM u GROUP BY s HAVING 1")
    assert err.value.code == "42804"


def test_order_by_position_and_nulls(conn: Connection) -> None:
    assert rows(conn, "SELECT id, n FROM u ORDER BY 2 DESC") == [(3, 30), (2, 20), (1, 10), (4, 5)]
    assert rows(conn, "SELECT s FROM u ORDER BY s") == [(None,), ("a",), ("a",), ("b",)]
    assert rows(conn, "SELECT s FROM u ORDER BY s NULLS LAST") == [("a",), ("a",), ("b",), (None,)]
    assert rows(conn, "SELECT s FROM u ORDER BY s DESC") == [("b",), ("a",), ("a",), (None,)]
    assert rows(conn, "SELECT s FROM u ORDER BY s DESC NULLS FIRST") == [(None,), ("b",), ("a",), ("a",)]
    assert rows(conn, "SELECT s, count(*) FROM u GROUP BY s ORDER BY s NULLS LAST") == [
        ("a", 2),
        ("b", 1),
        (None, 1),
    ]
    with pytest.raises(InvalidColumnReference) as err:
        conn.execute("SELECT id FROM u ORDER BY 5")
    assert err.value.code == "42P10"


def test_distinct_aggregates(conn: Connection) -> None:
    assert rows(conn, "SELECT count(DISTINCT s), count(s), count(*), sum(DISTINCT n) FROM u") == [
        (2, 3, 4, 65)
    ]
    assert rows(conn, "SELECT s, count(DISTINCT n) FROM u GROUP BY s ORDER BY s") == [
        (None, 1),
        ("a", 2),
        ("b", 1),
    ]
    with pytest.raises(ChangefeedError, match="DISTINCT specified, but lower is not an aggregate function"):
        conn.execute("SELECT lower(DISTINCT s) FROM u")
