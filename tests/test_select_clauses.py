"""SELECT clauses clients and BI tools send: OFFSET, CASE, table aliases, HAVING, ORDER BY a
position, NULLS FIRST/LAST (CockroachDB's semantics: NULLs sort first ascending)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.exceptions import (
    ChangefeedError,
    GroupingError,
    InvalidColumnReference,
    InvalidRecursion,
    StatementTooComplex,
)
from changefeed.sql.statements import common_tables


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Connection]:
    with changefeed.connect(tmp_path / "db") as c:
        c.execute("CREATE TABLE u (id INT PRIMARY KEY, s STRING, n INT)")
        c.execute("INSERT INTO u VALUES (1, 'a', 10), (2, 'b', 20), (3, NULL, 30), (4, 'a', 5)")
        yield c


def rows(conn: Connection, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    return [tuple(r) for r in conn.execute(sql, params).rows]


def test_offset(conn: Connection) -> None:
    assert rows(conn, "SELECT id FROM u ORDER BY id LIMIT 2 OFFSET 1") == [(2,), (3,)]
    assert rows(conn, "SELECT id FROM u ORDER BY id OFFSET 3") == [(4,)]
    assert rows(conn, "SELECT id FROM u ORDER BY id OFFSET 2 ROWS") == [(3,), (4,)]
    assert rows(conn, "SELECT id FROM u OFFSET 9") == []
    assert rows(conn, "SELECT id FROM u LIMIT 2 OFFSET 1") == [(2,), (3,)]  # the scan's order
    with pytest.raises(ChangefeedError, match="OFFSET must not be negative"):
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


def test_group_by_position_and_output_name(conn: Connection) -> None:
    """``GROUP BY 1`` is the select list's first column and ``GROUP BY name`` an output column
    the input does not have, as in PostgreSQL and CockroachDB (an integer was grouped by as a
    constant: one group of every row)."""
    assert rows(conn, "SELECT s, count(*) FROM u GROUP BY 1 ORDER BY 1") == [(None, 1), ("a", 2), ("b", 1)]
    assert rows(conn, "SELECT n > 9 AS big, count(*) FROM u GROUP BY big ORDER BY 2") == [
        (False, 1),
        (True, 3),
    ]
    assert rows(conn, "SELECT upper(s) AS s, count(*) FROM u GROUP BY s ORDER BY 2, 1") == [
        (None, 1),
        ("B", 1),
        ("A", 2),
    ]  # an input column wins over an output name: grouped by s, then upper-cased
    with pytest.raises(InvalidColumnReference, match="GROUP BY position 3 is not in select list"):
        conn.execute("SELECT s, count(*) FROM u GROUP BY 3")
    with pytest.raises(GroupingError, match="aggregate functions are not allowed in GROUP BY"):
        conn.execute("SELECT count(*), s FROM u GROUP BY 1")


def test_grouped_select_reads_only_grouped_columns(conn: Connection) -> None:
    """A column outside aggregates must be grouped by (42803), unless the whole primary key is."""
    for sql in (
        "SELECT s, count(*) FROM u",
        "SELECT s, n FROM u GROUP BY s",
        "SELECT s, n + 1 FROM u GROUP BY s",
        "SELECT s, count(*) FROM u GROUP BY s HAVING n > 1",
    ):
        with pytest.raises(GroupingError, match="must appear in the GROUP BY clause") as err:
            conn.execute(sql)
        assert err.value.code == "42803"
    assert rows(conn, "SELECT id, s, n FROM u GROUP BY id ORDER BY id LIMIT 1") == [(1, "a", 10)]
    assert rows(conn, "SELECT upper(s) || '!', sum(n) + 1 FROM u GROUP BY upper(s) ORDER BY 2") == [
        ("A!", 16),
        ("B!", 21),
        (None, 31),
    ]
    assert rows(conn, "SELECT 1, count(*) FROM u") == [(1, 4)]


def test_with_queries_and_derived_tables(conn: Connection) -> None:
    """``WITH x AS (..) SELECT ..`` (non-recursive, a query may read the ones before it; a name
    shadows a table's) and ``FROM (SELECT ..) [AS] x``, as PostgreSQL and CockroachDB take them."""
    assert rows(conn, "WITH big AS (SELECT id, s FROM u WHERE n > 9) SELECT * FROM big ORDER BY id") == [
        (1, "a"),
        (2, "b"),
        (3, None),
    ]
    got = rows(
        conn,
        "WITH a AS (SELECT s, n FROM u WHERE s IS NOT NULL),"
        " b AS (SELECT s, sum(n) AS total FROM a GROUP BY s)"
        " SELECT s, total FROM b WHERE total > 15 ORDER BY s",
    )
    assert got == [("b", 20)]
    assert rows(conn, "WITH U AS (SELECT 42 AS id) SELECT id FROM u") == [(42,)]  # unquoted: any case
    assert rows(
        conn, "SELECT x.s, x.c FROM (SELECT s, count(*) AS c FROM u GROUP BY s) AS x WHERE x.c > 1"
    ) == [("a", 2)]
    assert rows(conn, "SELECT * FROM (SELECT id FROM u) ORDER BY 1 DESC LIMIT 2") == [(4,), (3,)]
    # a WITH query read by a subquery of the statement
    assert rows(
        conn,
        "WITH a AS (SELECT id FROM u WHERE s = 'a') SELECT n FROM u WHERE id IN (SELECT id FROM a) ORDER BY n",
    ) == [(5,), (10,)]
    with pytest.raises(ChangefeedError, match='WITH query name "a" specified more than once') as err:
        conn.execute("WITH a AS (SELECT 1), a AS (SELECT 2) SELECT * FROM a")
    assert err.value.code == "42712"
    assert rows(conn, "WITH RECURSIVE r AS (SELECT 1) SELECT * FROM r") == [(1,)]  # not recursive after all
    got = rows(
        conn, "WITH a AS (SELECT id, n FROM u) SELECT u.s, a.n FROM u JOIN a ON u.id = a.id ORDER BY a.n"
    )
    assert got == [("a", 5), ("a", 10), ("b", 20), (None, 30)]
    with pytest.raises(ChangefeedError, match="does not exist"):
        conn.execute("WITH a AS (SELECT * FROM nowhere) SELECT * FROM a")


def test_integer_division_truncates_and_remainder_keeps_the_dividend_sign(conn: Connection) -> None:
    """As PostgreSQL (and YDB) divide integers: toward zero, ``%`` with the dividend's sign (it
    was Python's floor: -5 / 3 gave -2 and -5 % 3 gave 1); division by zero is 22012."""
    got = rows(conn, "SELECT -5 / 3, -5 % 3, 5 / -3, 5 % -3, -6 / 3, -6 % 3, 7 / 2, -5.5 % 3, mod(-5, 3)")
    assert got == [(-1, -2, -1, 2, -2, 0, 3, Decimal("-2.5"), -2)]
    assert rows(conn, "SELECT CAST(-5.5 AS FLOAT) % 3") == [(-2.5,)]
    assert rows(conn, "SELECT id, (n - 21) / 10, (n - 21) % 10 FROM u ORDER BY id") == [
        (1, -1, -1),
        (2, 0, -1),
        (3, 0, 9),
        (4, -1, -6),
    ]
    for sql in ("SELECT 1 / 0", "SELECT 1 % 0", "SELECT n / (id - id) FROM u"):
        with pytest.raises(ChangefeedError, match="division by zero") as err:
            conn.execute(sql)
        assert err.value.code == "22012"


def test_is_distinct_from(conn: Connection) -> None:
    """``IS [NOT] DISTINCT FROM``: NULL compared as a value, the result never NULL."""
    assert rows(conn, "SELECT id FROM u WHERE s IS DISTINCT FROM 'a' ORDER BY id") == [(2,), (3,)]
    assert rows(conn, "SELECT id FROM u WHERE s IS NOT DISTINCT FROM NULL") == [(3,)]
    assert rows(conn, "SELECT id FROM u WHERE s IS NOT DISTINCT FROM $1 ORDER BY id", ("a",)) == [(1,), (4,)]
    res = conn.execute(
        "SELECT NULL IS DISTINCT FROM NULL, 1 IS DISTINCT FROM NULL, 1 IS NOT DISTINCT FROM 1, 1 IS DISTINCT FROM 2"
    )
    assert (res.columns, res.rows) == (["?column?"] * 4, [(False, True, True, True)])
    assert conn.execute("SELECT CASE WHEN id > 1 THEN 'x' END FROM u WHERE id = 1").columns == ["case"]


def test_concat_writes_values_as_sql_text(conn: Connection) -> None:
    """``concat``/``concat_ws`` write a boolean as ``||`` does, CockroachDB's ``true``/``false``
    (it was Python's ``True``)."""
    assert rows(conn, "SELECT concat('a', 1, true, NULL), concat_ws(',', false, 2), 'x' || true") == [
        ("a1true", "false,2", "xtrue")
    ]


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


# ------------------------------------------------------------------------------------------ joins
@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Connection]:
    with changefeed.connect(tmp_path / "shop") as c:
        c.execute("CREATE TABLE a (id INT PRIMARY KEY, name STRING)")
        c.execute("CREATE TABLE b (id INT PRIMARY KEY, aid INT, amt INT)")
        c.execute("INSERT INTO a VALUES (1, 'ada'), (2, 'bob'), (3, 'cy')")
        c.execute("INSERT INTO b VALUES (10, 1, 5), (11, 1, 7), (12, 2, 1), (13, 9, 100)")
        yield c


def test_joins(shop: Connection) -> None:
    assert rows(shop, "SELECT a.name, b.amt FROM a JOIN b ON a.id = b.aid ORDER BY b.amt") == [
        ("bob", 1),
        ("ada", 5),
        ("ada", 7),
    ]
    got = rows(
        shop, "SELECT x.name, sum(y.amt) FROM a x LEFT JOIN b y ON x.id = y.aid GROUP BY x.name ORDER BY 1"
    )
    assert got == [("ada", 12), ("bob", 1), ("cy", None)]
    res = shop.execute("SELECT * FROM a JOIN b ON a.id = b.aid WHERE b.amt > 5")
    assert (res.columns, res.rows) == (["id", "name", "id", "aid", "amt"], [(1, "ada", 11, 1, 7)])
    assert rows(shop, "SELECT name, amt FROM a, b WHERE a.id = b.aid AND amt < 6 ORDER BY amt") == [
        ("bob", 1),
        ("ada", 5),
    ]
    assert rows(shop, "SELECT count(*) FROM a CROSS JOIN b") == [(12,)]
    assert rows(shop, "SELECT a.name FROM a LEFT JOIN b ON a.id = b.aid WHERE b.id IS NULL") == [("cy",)]
    assert rows(shop, "SELECT a.name, b.amt FROM a INNER JOIN b ON a.id = b.aid AND b.amt > 5") == [
        ("ada", 7)
    ]
    assert rows(shop, "SELECT a.name, b.id FROM a RIGHT JOIN b ON a.id = b.aid ORDER BY b.id") == [
        ("ada", 10),
        ("ada", 11),
        ("bob", 12),
        (None, 13),
    ]
    # FOR UPDATE: a write transaction holds the write lock from its first statement anyway
    shop.execute("BEGIN")
    assert rows(shop, "SELECT name FROM a WHERE id = 1 FOR UPDATE") == [("ada",)]
    locked = "SELECT a.name FROM a JOIN b ON a.id = b.aid WHERE b.id = 12 FOR NO KEY UPDATE OF a NOWAIT"
    assert rows(shop, locked) == [("bob",)]
    shop.execute("COMMIT")


def test_join_errors(shop: Connection) -> None:
    with pytest.raises(ChangefeedError) as ambiguous:
        shop.execute("SELECT id FROM a JOIN b ON a.id = b.aid")
    assert (ambiguous.value.code, str(ambiguous.value)) == ("42702", 'column reference "id" is ambiguous')
    with pytest.raises(ChangefeedError) as twice:
        shop.execute("SELECT * FROM a JOIN a ON true")
    assert twice.value.code == "42712"
    with pytest.raises(ChangefeedError) as missing:
        shop.execute("SELECT * FROM a JOIN nope ON true")
    assert missing.value.code == "42P01"


@pytest.mark.parametrize("seed", range(4))
def test_joins_match_sqlite(tmp_path: Path, seed: int) -> None:
    """Random tables and join queries, answered by the engine and by SQLite itself."""
    import random
    import sqlite3

    rng = random.Random(seed)
    oracle = sqlite3.connect(":memory:")
    with changefeed.connect(tmp_path / "db") as conn:
        for ddl in (
            "CREATE TABLE p (id INT PRIMARY KEY, g INT, v INT)",
            "CREATE TABLE q (id INT PRIMARY KEY, pid INT, w INT)",
        ):
            conn.execute(ddl)
            oracle.execute(ddl)
        for table in ("p", "q"):
            for i in range(rng.randint(0, 25)):
                row = (i, rng.choice([None, *range(8)]), rng.choice([None, *range(-5, 5)]))
                conn.execute(f"INSERT INTO {table} VALUES ($1, $2, $3)", row)
                oracle.execute(f"INSERT INTO {table} VALUES (?, ?, ?)", row)
        queries = [
            "SELECT p.id, q.id FROM p JOIN q ON p.g = q.pid",
            "SELECT p.id, q.id, q.w FROM p LEFT JOIN q ON p.g = q.pid AND q.w > 0",
            "SELECT p.id, q.id FROM p LEFT JOIN q ON p.v < q.w",
            "SELECT p.g, count(q.id), sum(q.w) FROM p LEFT JOIN q ON q.pid = p.g GROUP BY p.g",
            "SELECT count(*) FROM p, q WHERE p.v = q.w",
            "SELECT p.id FROM p LEFT JOIN q ON p.id = q.pid WHERE q.id IS NULL",
            "SELECT p.id, q.id FROM p CROSS JOIN q WHERE p.g = 1",
            "SELECT p.id, q.id FROM p RIGHT JOIN q ON p.g = q.pid",
            "SELECT p.id, q.id, q.w FROM p RIGHT JOIN q ON p.v < q.w",
        ]
        for sql in queries:
            mine = sorted(conn.execute(sql).rows, key=repr)
            theirs = sorted(oracle.execute(sql).fetchall(), key=repr)
            assert mine == theirs, sql


def test_insert_select(shop: Connection) -> None:
    shop.execute("CREATE TABLE c (id INT PRIMARY KEY, label STRING)")
    res = shop.execute("INSERT INTO c SELECT id, name FROM a WHERE id < 3")
    assert (res.status, res.rowcount) == ("INSERT 2", 2)
    with pytest.raises(ChangefeedError) as dup:
        shop.execute("INSERT INTO c SELECT id, name FROM a")  # 1 and 2 are there: nothing written
    assert dup.value.code == "23505"
    assert rows(shop, "SELECT count(*) FROM c") == [(2,)]
    shop.execute("INSERT INTO c (id, label) SELECT b.id, a.name || '!' FROM a JOIN b ON a.id = b.aid")
    shop.execute("UPSERT INTO c SELECT id, upper(name) FROM a")
    assert rows(shop, "SELECT id, label FROM c ORDER BY id") == [
        (1, "ADA"),
        (2, "BOB"),
        (3, "CY"),
        (10, "ada!"),
        (11, "ada!"),
        (12, "bob!"),
    ]


# ------------------------------------------------------------------------------------- subqueries
def test_subqueries(shop: Connection) -> None:
    shop.execute("INSERT INTO b VALUES (14, NULL, 3)")
    assert rows(shop, "SELECT name FROM a WHERE id IN (SELECT aid FROM b) ORDER BY 1") == [("ada",), ("bob",)]
    assert rows(shop, "SELECT name FROM a WHERE id NOT IN (SELECT aid FROM b)") == []  # a NULL in the list
    assert rows(shop, "SELECT name FROM a WHERE id NOT IN (SELECT aid FROM b WHERE aid IS NOT NULL)") == [
        ("cy",)
    ]
    assert rows(shop, "SELECT (SELECT max(amt) FROM b), (SELECT name FROM a WHERE id = 9)") == [(100, None)]
    assert rows(shop, "SELECT count(*) FROM a WHERE EXISTS (SELECT 1 FROM b WHERE amt > 50)") == [(3,)]
    assert rows(shop, "SELECT count(*) FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE amt > 500)") == [(3,)]
    res = shop.execute("INSERT INTO a VALUES ((SELECT max(id) + 1 FROM a), 'dee') RETURNING id")
    assert res.rows == [(4,)]
    res = shop.execute(
        "UPDATE b SET amt = (SELECT count(*) FROM a) WHERE aid IN (SELECT id FROM a WHERE name = $1) RETURNING id, amt",
        ["bob"],
    )
    assert res.rows == [(12, 4)]
    res = shop.execute("DELETE FROM b WHERE aid NOT IN (SELECT id FROM a) OR aid IS NULL RETURNING id")
    assert sorted(res.rows) == [(13,), (14,)]


def test_subquery_errors(shop: Connection) -> None:
    with pytest.raises(ChangefeedError) as many:
        shop.execute("SELECT (SELECT id FROM b)")
    assert (many.value.code, str(many.value)) == (
        "21000",
        "more than one row returned by a subquery used as an expression",
    )
    with pytest.raises(ChangefeedError, match="subquery must return only one column"):
        shop.execute("SELECT (SELECT id, aid FROM b LIMIT 1)")
    with pytest.raises(ChangefeedError) as outer_unknown:  # neither query has the column
        shop.execute("SELECT name FROM a WHERE EXISTS (SELECT 1 FROM b WHERE b.aid = a.nosuch)")
    assert outer_unknown.value.code == "42703"
    with pytest.raises(ChangefeedError, match="not supported here"):  # no outer row to read
        shop.execute("INSERT INTO a VALUES ((SELECT max(id) FROM b WHERE b.aid = a.id), 'x')")
    with pytest.raises(ChangefeedError) as unknown:
        shop.execute("SELECT z.id FROM a")
    assert (unknown.value.code, str(unknown.value)) == ("42P01", 'missing FROM-clause entry for table "z"')


def test_correlated_subqueries(shop: Connection) -> None:
    """A subquery that reads the outer row's columns runs for each row, the outer columns
    written in as that row's values (a key compared with one is a point read)."""
    got = rows(
        shop,
        "SELECT name, (SELECT count(*) FROM b WHERE b.aid = a.id) AS n,"
        " EXISTS (SELECT 1 FROM b WHERE aid = a.id AND amt > 6) AS big FROM a ORDER BY id",
    )
    assert got == [("ada", 2, True), ("bob", 1, False), ("cy", 0, False)]
    got = rows(
        shop, "SELECT name FROM a WHERE id IN (SELECT aid FROM b WHERE b.amt > a.id * 3) ORDER BY name"
    )
    assert got == [("ada",)]
    got = rows(shop, "SELECT id, (SELECT name FROM a WHERE a.id = b.aid) FROM b ORDER BY id")
    assert got == [(10, "ada"), (11, "ada"), (12, "bob"), (13, None)]
    res = shop.execute("DELETE FROM a WHERE NOT EXISTS (SELECT 1 FROM b WHERE b.aid = a.id) RETURNING name")
    assert res.rows == [("cy",)]
    res = shop.execute(
        "UPDATE a SET name = name || (SELECT sum(amt) FROM b WHERE b.aid = a.id) RETURNING name"
    )
    assert sorted(res.rows) == [("ada12",), ("bob1",)]


def test_in_list_of_many_values_is_a_lookup(tmp_path: Path) -> None:
    """``x IN (SELECT ..)`` of thousands of values answers each row by a set lookup, with SQL's
    NULL rules and numbers compared across types as before."""
    with changefeed.connect(tmp_path / "db") as c:
        c.execute("CREATE TABLE big (id INT PRIMARY KEY, f FLOAT8)")
        c.executemany("INSERT INTO big VALUES ($1, $2)", [(i, i / 2) for i in range(5000)])
        assert rows(c, "SELECT count(*) FROM big WHERE id IN (SELECT id * 2 FROM big)") == [(2500,)]
        assert rows(c, "SELECT count(*) FROM big WHERE f IN (SELECT id FROM big)") == [(2500,)]
        assert rows(c, "SELECT count(*) FROM big WHERE id NOT IN (SELECT id + 1 FROM big)") == [(1,)]
        in_list = ", ".join(str(i) for i in range(10)) + ", NULL"
        assert rows(
            c, f"SELECT id IN ({in_list}), 99 IN ({in_list}), 99 NOT IN ({in_list}) FROM big WHERE id = 3"
        ) == [(True, None, None)]


def test_recursive_with_query_is_bounded(shop: Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recursion that never ends is stopped with an error instead of running out of memory; a
    UNION (not ALL) recursion over a cycle ends by itself."""
    monkeypatch.setattr(common_tables, "MAX_ROWS", 1000)
    with pytest.raises(StatementTooComplex, match='recursive query "t" produced more than 1000 rows'):
        shop.execute("WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t")
    got = rows(shop, "WITH RECURSIVE t(n) AS (SELECT 1 UNION SELECT n % 7 + 1 FROM t) SELECT count(*) FROM t")
    assert got == [(7,)]
    with pytest.raises(InvalidRecursion):
        shop.execute("WITH RECURSIVE t AS (SELECT id FROM t UNION SELECT 1) SELECT * FROM t")


def test_a_regular_expression_that_backtracks_without_end_is_refused(
    conn: Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``(a|aa)+$`` over a long run of a's backtracks exponentially in a backtracking engine; the
    match gives up after its time with PostgreSQL's 2201B instead of holding the process."""
    from changefeed.engine import patterns

    monkeypatch.setattr(patterns, "REGEX_TIMEOUT_S", 0.2)
    with pytest.raises(ChangefeedError, match="regular expression is too complex") as err:
        conn.execute("SELECT repeat('a', 60) || '!' ~ '(a|aa)+$'")
    assert err.value.code == "2201B"
    assert rows(conn, "SELECT 'abc' ~ '^a(b|c)+$', 'ABC' ~* 'b', 'abab' ~ '(ab)\\1'") == [(True, True, True)]


def test_like_does_not_backtrack(conn: Connection) -> None:
    """A LIKE pattern of many ``%`` over a long value answers at once (as a regular expression of
    ``.*`` runs it took minutes), with the same answers."""
    got = rows(
        conn,
        "SELECT repeat('a', 5000) LIKE '%a%a%a%a%a%b', repeat('a', 5000) || 'b' LIKE '%a%a%a%a%a%b',"
        " 'a_c' LIKE 'a\\_c', 'abc' LIKE 'a\\_c', 'ABC' ILIKE 'a%C', 'x' LIKE '_', '' LIKE '%'",
    )
    assert got == [(False, True, True, False, True, True, True)]
