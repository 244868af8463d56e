"""``INSERT/UPSERT/UPDATE/DELETE .. RETURNING`` in the engine and through the PostgreSQL endpoint
(psycopg, asyncpg, psql, pgjdbc's generated keys), and result columns whose types a client learns
from Describe of a statement before any row exists (asyncpg and pgjdbc decode rows by them)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

import changefeed
from changefeed.exceptions import ChangefeedError, GroupingError
from tests.pg_server import RunningServer, start_server

JDBC_JAR = Path("/usr/share/java/postgresql.jar")


# ------------------------------------------------------------------------------------ the engine
def test_returning_gives_the_rows_written(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute(
            "CREATE TABLE u (id INT PRIMARY KEY, n STRING, d INT DEFAULT 7, s INT AS (id * 10) STORED)"
        )
        res = conn.execute("INSERT INTO u (id, n) VALUES (1, 'a'), (2, 'b') RETURNING id, n, d, s")
        assert (res.status, res.columns, res.rows) == (
            "INSERT 2",
            ["id", "n", "d", "s"],
            [(1, "a", 7, 10), (2, "b", 7, 20)],
        )
        # ON CONFLICT DO NOTHING returns only the rows it inserted
        res = conn.execute(
            "INSERT INTO u (id, n) VALUES (1, 'x'), (3, 'c') ON CONFLICT DO NOTHING RETURNING *"
        )
        assert (res.rowcount, res.rows) == (1, [(3, "c", 7, 30)])
        # UPSERT returns the whole row as written, the columns it did not name included
        res = conn.execute("UPSERT INTO u (id, n) VALUES (1, 'z') RETURNING *")
        assert res.rows == [(1, "z", 7, 10)]
        res = conn.execute("UPDATE u SET n = upper(n) WHERE id < 3 RETURNING id, n || '!' AS bang")
        assert (res.status, res.columns, sorted(res.rows)) == (
            "UPDATE 2",
            ["id", "bang"],
            [(1, "Z!"), (2, "B!")],
        )
        res = conn.execute("DELETE FROM u WHERE id = 2 RETURNING n, d + 1")
        assert (res.status, res.columns, res.rows) == ("DELETE 1", ["n", "?column?"], [("B", 8)])
        res = conn.execute("DELETE FROM u WHERE id = 99 RETURNING n")
        assert (res.status, res.columns, res.rows) == ("DELETE 0", ["n"], [])
        # without RETURNING: no columns, as before
        res = conn.execute("UPDATE u SET d = 1 WHERE id = 1")
        assert (res.columns, res.rows, res.rowcount) == ([], [], 1)


def test_returning_subqueries_read_the_table_as_the_statement_began(tmp_path: Path) -> None:
    """As in PostgreSQL, a subquery in RETURNING reads the statement's snapshot, not its writes."""
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE s (id INT PRIMARY KEY, v INT)")
        conn.execute("INSERT INTO s VALUES (1, 1)")
        res = conn.execute("INSERT INTO s VALUES (2, 2) RETURNING id, (SELECT count(*) FROM s) AS n")
        assert res.rows == [(2, 1)]
        res = conn.execute("UPDATE s SET v = 10 WHERE id = 1 RETURNING id, (SELECT sum(v) FROM s)")
        assert res.rows == [(1, 3)]
        res = conn.execute(
            "DELETE FROM s WHERE id = 2 RETURNING id, EXISTS (SELECT 1 FROM s WHERE id = 2) AS was"
        )
        assert res.rows == [(2, True)]
        res = conn.execute(
            "UPSERT INTO s VALUES (1, 5) RETURNING v, (SELECT v FROM s WHERE id = 1) AS before"
        )
        assert res.rows == [(5, 10)]


def test_insert_select_takes_on_conflict_and_returning(tmp_path: Path) -> None:
    """``INSERT/UPSERT INTO t SELECT ..`` with ``ON CONFLICT DO NOTHING`` and ``RETURNING``, as
    PostgreSQL and CockroachDB take them."""
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE src (id INT PRIMARY KEY, v INT)")
        conn.execute("CREATE TABLE dst (id INT PRIMARY KEY, v INT, d INT DEFAULT 7)")
        conn.execute("INSERT INTO src VALUES (1, 10), (2, 20), (3, 30)")
        conn.execute("INSERT INTO dst (id, v) VALUES (2, 0)")
        res = conn.execute(
            "INSERT INTO dst (id, v) SELECT id, v FROM src ON CONFLICT DO NOTHING"
            " RETURNING id, d, (SELECT count(*) FROM dst) AS before"
        )
        assert (res.status, res.columns, sorted(res.rows)) == (
            "INSERT 2",
            ["id", "d", "before"],
            [(1, 7, 1), (3, 7, 1)],
        )
        res = conn.execute(
            "UPSERT INTO dst (id, v) SELECT id, v + $1 FROM src WHERE id = 2 RETURNING *", (1,)
        )
        assert (res.status, res.rows) == ("UPSERT 1", [(2, 21, 7)])
        # no row selected: no row returned, the columns all the same
        res = conn.execute("INSERT INTO dst (id, v) SELECT id, v FROM src WHERE id > 9 RETURNING id, v")
        assert (res.status, res.columns, res.rows) == ("INSERT 0", ["id", "v"], [])
        with pytest.raises(ChangefeedError) as err:  # a duplicate without ON CONFLICT: nothing written
            conn.execute("INSERT INTO dst (id, v) SELECT id + 2, v FROM src RETURNING id")
        assert err.value.code == "23505"
        assert sorted(conn.execute("SELECT id FROM dst").rows) == [(1,), (2,), (3,)]


def test_returning_an_aggregate_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE u (id INT PRIMARY KEY, n STRING)")
        with pytest.raises(GroupingError) as err:
            conn.execute("INSERT INTO u VALUES (9, 'q') RETURNING count(*)")
        assert err.value.code == "42803"
        assert "aggregate functions are not allowed in RETURNING" in str(err.value)
        assert conn.execute("SELECT count(*) FROM u").rows == [(0,)]
        with pytest.raises(ChangefeedError) as missing:
            conn.execute("INSERT INTO u VALUES (9, 'q') RETURNING nope")
        assert missing.value.code == "42703"
        assert conn.execute("SELECT count(*) FROM u").rows == [(0,)]


def test_returning_needs_the_select_privilege(tmp_path: Path) -> None:
    """As in CockroachDB: an INSERT that returns rows reads them (SELECT)."""
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE u (id INT PRIMARY KEY, n STRING)")
        conn.execute("CREATE USER w")
        conn.execute("GRANT INSERT ON TABLE u TO w")
    with changefeed.connect(db, user="w") as writer:
        writer.execute("INSERT INTO u VALUES (1, 'a')")
        with pytest.raises(ChangefeedError) as denied:
            writer.execute("INSERT INTO u VALUES (2, 'b') RETURNING id")
        assert denied.value.code == "42501"
    with changefeed.connect(db) as conn:
        assert conn.execute("INSERT INTO u VALUES (3, 'c') RETURNING id").rows == [(3,)]
        assert conn.execute("SELECT id FROM u ORDER BY id").rows == [(1,), (3,)]


# -------------------------------------------------------------------------------- over the wire
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = tmp_path_factory.mktemp("returning") / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE r (id INT PRIMARY KEY, n STRING, d INT DEFAULT 7, f FLOAT)")
        conn.execute("CREATE TABLE gen (id INT PRIMARY KEY DEFAULT unique_rowid(), v STRING)")
    srv = start_server(db)
    yield srv
    srv.stop()


def test_psycopg_fetches_returned_rows(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cur = conn.execute(
            "INSERT INTO r (id, n) VALUES (%s, %s), (%s, %s) RETURNING id, n, d", (1, "a", 2, "b")
        )
        assert (cur.statusmessage, cur.fetchall()) == ("INSERT 0 2", [(1, "a", 7), (2, "b", 7)])
        cur = conn.execute("UPDATE r SET d = d + %s WHERE id = %s RETURNING *", (1, 1), binary=True)
        assert (cur.statusmessage, cur.fetchall()) == ("UPDATE 1", [(1, "a", 8, None)])
        cur = conn.execute("DELETE FROM r WHERE id = 2 RETURNING n")
        assert (cur.statusmessage, cur.fetchone()) == ("DELETE 1", ("b",))
        cur = conn.execute("INSERT INTO r (id, n) VALUES (3, 'c') ON CONFLICT DO NOTHING RETURNING id")
        assert cur.fetchall() == [(3,)]


def test_psql_prints_returned_rows(server: RunningServer) -> None:
    psql = shutil.which("psql")
    assert psql, "psql is missing: make setup installs it (Debian postgresql-client)"
    out = subprocess.run(
        [
            psql,
            server.dsn(),
            "-X",
            "-c",
            "UPSERT INTO r (id, n) VALUES (40, 'p') RETURNING id, n, d * 2 AS twice",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.splitlines() == [
        " id | n | twice ",
        "----+---+-------",
        " 40 | p |    14",
        "(1 row)",
        "",
        "INSERT 0 1",
    ]


def test_asyncpg_prepared_returning_and_expressions_have_their_types(server: RunningServer) -> None:
    """asyncpg prepares (Describe of the statement) and decodes rows in binary by the types it
    was told: each described type must be the one the rows are sent as."""
    import asyncpg

    async def go() -> None:
        conn = await asyncpg.connect(
            host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
        )
        try:
            ins = await conn.prepare(
                "INSERT INTO r (id, n, f) VALUES ($1, $2, $3)"
                " RETURNING id, n, d, id * 2 AS twice, n || '!' AS bang, length(n) AS l, f / 2 AS half"
            )
            assert [(a.name, a.type.name) for a in ins.get_attributes()] == [
                ("id", "int8"),
                ("n", "text"),
                ("d", "int8"),
                ("twice", "int8"),
                ("bang", "text"),
                ("l", "int8"),
                ("half", "float8"),
            ]
            assert tuple(await ins.fetchrow(10, "ten", 5.0)) == (10, "ten", 7, 20, "ten!", 3, 2.5)
            # a SELECT described while no row matches (NULL parameters): the types from its shape
            sel = await conn.prepare(
                "SELECT id / 4 AS q, id::FLOAT * 2 AS x, id * 1.5 AS y, id > 5 AS big FROM r WHERE id = $1"
            )
            assert [(a.name, a.type.name) for a in sel.get_attributes()] == [
                ("q", "int8"),
                ("x", "float8"),
                ("y", "numeric"),
                ("big", "bool"),
            ]
            assert tuple(await sel.fetchrow(10)) == (2, 20.0, Decimal("15.0"), True)
            # a type the shape does not tell is described as text, and the rows come as text
            other = await conn.prepare("SELECT coalesce(d, 0) AS c, now() AS t FROM r WHERE id = $1")
            assert [a.type.name for a in other.get_attributes()] == ["text", "timestamptz"]
            row = await other.fetchrow(10)
            assert row["c"] == "7"
            assert row["t"].tzinfo is not None
            # parameters take the type they are cast to, or the number column they meet
            assert await conn.fetchval("SELECT $1::INT + 1 AS p FROM r WHERE id = 10", 41) == 42
            assert await conn.fetchval("SELECT id FROM r WHERE id + $1 = 11", 1) == 10
            assert await conn.fetchval("DELETE FROM r WHERE id = $1 RETURNING n", 10) == "ten"
            await conn.execute("UPSERT INTO r (id, n) VALUES (11, 'eleven')")
            got = await conn.fetchrow("UPDATE r SET f = $1 WHERE id = 11 RETURNING f, f * 2 AS f2", 1.25)
            assert tuple(got) == (1.25, 2.5)
            dec = await conn.fetchval("SELECT 7.0 / 2 AS d FROM r WHERE id = 11")
            assert dec == Decimal("3.5")
            # INSERT .. SELECT .. RETURNING: described before it runs, as an INSERT .. VALUES is
            copy = await conn.prepare(
                "INSERT INTO r (id, n) SELECT id + $1, n FROM r WHERE id = 11 RETURNING id, n"
            )
            assert [(a.name, a.type.name) for a in copy.get_attributes()] == [("id", "int8"), ("n", "text")]
            assert [tuple(r) for r in await copy.fetch(1000)] == [(1011, "eleven")]
        finally:
            await conn.close()

    asyncio.run(go())


JAVA_KEYS = """
import java.sql.*;
public class Keys {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], "root", "")) {
            try (PreparedStatement p = c.prepareStatement("INSERT INTO gen (v) VALUES (?)", Statement.RETURN_GENERATED_KEYS)) {
                for (String v : new String[] {"one", "two"}) {
                    p.setString(1, v);
                    System.out.println("rows " + p.executeUpdate());
                    try (ResultSet k = p.getGeneratedKeys()) {
                        while (k.next()) System.out.println("key " + (k.getLong("id") > 0) + " " + k.getString("v"));
                    }
                }
            }
            try (PreparedStatement p = c.prepareStatement("UPDATE gen SET v = upper(v) RETURNING v")) {
                try (ResultSet r = p.executeQuery()) { while (r.next()) System.out.println("updated " + r.getString(1)); }
            }
        }
    }
}
"""


def test_jdbc_generated_keys(server: RunningServer, tmp_path: Path) -> None:
    """pgjdbc's RETURN_GENERATED_KEYS appends ``RETURNING *`` to the INSERT (what Hibernate and
    Spring use to learn a generated key)."""
    assert JDBC_JAR.exists() and shutil.which("java"), (
        "the PostgreSQL JDBC driver (Debian libpostgresql-jdbc-java) or java is missing: make setup installs it"
    )
    src = tmp_path / "Keys.java"
    src.write_text(JAVA_KEYS)
    url = f"jdbc:postgresql://{server.host}:{server.port}/defaultdb?sslmode=disable"
    proc = subprocess.run(
        ["java", "-cp", str(JDBC_JAR), str(src), url], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:4] == ["rows 1", "key true one", "rows 1", "key true two"]
    assert sorted(lines[4:]) == ["updated ONE", "updated TWO"]


# ------------------------------------------------------------------- expressions back to SQL text
@pytest.mark.parametrize(
    ("sql", "text"),
    [
        ("now()", "now()"),
        ("id * 10 + 1", "((id * 10) + 1)"),
        ("'it''s'", "'it''s'"),
        ("CAST(x AS DECIMAL(10, 2))", "x::DECIMAL(10, 2)"),
        ("-x", "(-x)"),
        ("NOT a AND b IS NOT NULL", "((NOT a) AND (b IS NOT NULL))"),
        ('"Mixed Case" IN (1, 2)', '("Mixed Case" IN (1, 2))'),
        ("x BETWEEN 1 AND 2.5", "(x BETWEEN 1 AND 2.5)"),
        ("ARRAY[1, NULL, true]", "ARRAY[1, NULL, true]"),
        ("email NOT ILIKE 'a%'", "(email NOT ILIKE 'a%')"),
        ("s LIKE '5!%' ESCAPE '!'", "(s LIKE '5!%' ESCAPE '!')"),
        ("CASE WHEN n > 1 THEN 'a' ELSE 'b' END", "CASE WHEN (n > 1) THEN 'a' ELSE 'b' END"),
        ("CASE n WHEN 1 THEN 2 END", "CASE n WHEN 1 THEN 2 END"),
    ],
)
def test_expressions_render_as_postgresql_prints_them(sql: str, text: str) -> None:
    from changefeed.sql.parser import parse
    from changefeed.sql.render import expr_sql

    (stmt,) = parse(f"SELECT {sql}", "sql")
    assert expr_sql(stmt.items[0].expr) == text  # type: ignore[attr-defined]
