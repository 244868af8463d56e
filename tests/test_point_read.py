"""Compiled point reads (``sql/statements/point.py``) answer exactly as the general path does, and
leave to it what they are not sure about."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import changefeed
from changefeed.sql.parser import parse
from changefeed.sql.statements.point import plan_point


def _same(conn: Any, sql: str, params: list[Any]) -> bool:
    """Whether the plan ran (True) and, if it did, gave the general path's result."""
    session = conn.session
    (stmt,) = parse(sql, "sql")
    plan = plan_point(session, stmt)
    assert plan is not None, sql
    got = plan.run(session, params)
    try:
        want = session.execute(stmt, params)
    except changefeed.ChangefeedError:
        assert got is None, (sql, params)
        return False
    if got is None:
        return False
    assert (got.columns, got.rows, got.types, got.status) == (
        want.columns,
        want.rows,
        want.types,
        want.status,
    ), (
        sql,
        params,
    )
    return True


def test_point_reads_match_the_general_path(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE t (v TEXT, id INT PRIMARY KEY, d DECIMAL, ts TIMESTAMPTZ, j JSONB)")
        conn.execute("CREATE TABLE c (a INT, b TEXT, n INT, PRIMARY KEY (a, b))")
        conn.execute("CREATE TABLE s (k STRING PRIMARY KEY, n INT2)")
        for i in range(-5, 50):
            conn.execute(
                "INSERT INTO t (v, id, d, ts, j) VALUES ($1, $2, $3, now(), $4)",
                [None if i % 7 == 0 else f"v{i}", i, i / 4, '{"a": 1}'],
            )
            conn.execute("INSERT INTO c (a, b, n) VALUES ($1, $2, $3)", [i % 5, f"b{i}", i])
            conn.execute("INSERT INTO s (k, n) VALUES ($1, $2)", [f"k{i}", i])
        rnd = random.Random(7)
        values: list[Any] = [
            0,
            5,
            -3,
            49,
            50,
            10**30,
            "5",
            "05",
            "+5",
            "-0",
            " 5",
            "5 ",
            "x",
            "5.0",
            5.0,
            True,
            None,
            "٥",
        ]
        ran = 0
        for _ in range(400):
            v = rnd.choice(values)
            ran += _same(conn, "SELECT v FROM t WHERE id = $1", [v])
            ran += _same(conn, "SELECT * FROM t WHERE $1 = id", [v])
            ran += _same(conn, "SELECT id AS x, V, d, j FROM t WHERE ID = $1", [v])
            ran += _same(
                conn, "SELECT n FROM c WHERE b = $2 AND a = $1", [v, rnd.choice(["b5", "b6", "zz", 5])]
            )
            ran += _same(conn, "SELECT * FROM s WHERE k = $1", [rnd.choice(["k3", "k99", 3, "K3"])])
        ran += _same(conn, "SELECT v FROM t WHERE id = 7", [])
        assert ran > 500  # most ran the plan
        # what the plan leaves: other shapes, and a changed catalog
        session = conn.session
        for sql in (
            "SELECT v FROM t WHERE id = $1 OR id = 2",
            "SELECT v FROM t WHERE id > $1",
            "SELECT count(*) FROM t WHERE id = $1",
            "SELECT v FROM t WHERE id = $1 ORDER BY v",
            "SELECT n FROM c WHERE a = $1",
            "SELECT v FROM nope WHERE id = $1",
            "SELECT t.v FROM t WHERE id = $1",
        ):
            assert plan_point(session, parse(sql, "sql")[0]) is None, sql
        (stmt,) = parse("SELECT * FROM t WHERE id = $1", "sql")
        plan = plan_point(session, stmt)
        assert plan is not None and plan.run(session, [3]) is not None
        conn.execute("BEGIN")  # explicit transactions take the general path
        assert plan.run(session, [3]) is None and plan_point(session, stmt) is None
        conn.execute("ROLLBACK")
        conn.execute("ALTER TABLE t ADD COLUMN extra INT")
        assert plan.run(session, [3]) is None  # planned at another catalog version


def test_point_reads_check_privileges_and_ttl_rows(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE p (id INT PRIMARY KEY, v TEXT)")
        conn.execute("INSERT INTO p VALUES (1, 'one')")
        conn.execute("CREATE USER eve")
    with changefeed.connect(db, user="eve") as conn:
        assert plan_point(conn.session, parse("SELECT v FROM p WHERE id = $1", "sql")[0]) is None
