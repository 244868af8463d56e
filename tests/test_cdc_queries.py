"""CockroachDB CDC queries (``CREATE CHANGEFEED [INTO ..] [WITH ..] AS SELECT ..``) without Spark:
parsing and checking with CockroachDB's errors, the Python evaluator through sinkless changefeeds
(``Connection.stream``), jobs' descriptions, the pg endpoint. The documents' examples are golden
files (tests/golden/crdb/, tests/golden/crdb/jobs/); the Spark face is tests/test_cdc_queries_spark.py.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.exceptions import (
    ChangefeedError,
    InvalidStatement,
    StatementSyntaxError,
    UndefinedColumn,
    UndefinedFunction,
    UnsupportedFeature,
)


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[changefeed.Connection]:
    c = changefeed.connect(tmp_path / "db")
    c.execute(
        "CREATE TABLE users (id INT PRIMARY KEY, name STRING, city STRING NOT NULL, score DECIMAL(10,2),"
        " f FLOAT, born DATE, seen TIMESTAMPTZ, tags JSONB)"
    )
    yield c
    c.close()


def _json(v: bytes) -> Any:
    return json.loads(v, parse_float=Decimal)


def _all(c: changefeed.Connection, sql: str) -> list[tuple[Any, ...]]:
    """A scan-only changefeed's messages (it ends by itself)."""
    with c.stream(sql) as feed:
        return [(t, k, _json(v)) for t, k, v in feed]


def _take(feed: Any, n: int, timeout_s: float = 20.0) -> list[tuple[Any, ...]]:
    """The next ``n`` row messages of a running changefeed (resolved messages skipped)."""
    out: list[tuple[Any, ...]] = []
    done = threading.Event()

    def pump() -> None:
        for t, k, v in feed:
            if t is None:
                continue
            out.append((t, k, _json(v)))
            if len(out) >= n:
                break
        done.set()

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    assert done.wait(timeout_s), f"got {out}"
    return out


# ------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    ("query", "error", "text"),
    [
        ("SELECT now() FROM users", UndefinedFunction, 'function "now" unsupported by CDC'),
        (
            "SELECT current_timestamp FROM users",
            UndefinedFunction,
            'function "current_timestamp" unsupported by CDC',
        ),
        (
            "SELECT gen_random_uuid() FROM users",
            UndefinedFunction,
            'function "gen_random_uuid" unsupported by CDC',
        ),
        ("SELECT sum(id) FROM users", UndefinedFunction, 'function "sum" unsupported by CDC'),
        (
            "SELECT rank() OVER (ORDER BY id) FROM users",
            UndefinedFunction,
            'function "rank" unsupported by CDC',
        ),
        (
            "SELECT generate_series(1, 3) FROM users",
            UndefinedFunction,
            'function "generate_series" unsupported by CDC',
        ),
        (
            "SELECT * FROM users WHERE EXISTS (SELECT 1)",
            UnsupportedFeature,
            "sub-query expressions not supported by CDC",
        ),
        ("SELECT (SELECT 1) FROM users", UnsupportedFeature, "sub-query expressions not supported by CDC"),
        ("SELECT * FROM users a, users b", UnsupportedFeature, "is not supported for more than 1 table"),
        (
            "SELECT * FROM users LEFT JOIN users u2 USING (id)",
            UnsupportedFeature,
            "is not supported for more than 1 table",
        ),
        ("SELECT * FROM users WHERE 1 > 2", InvalidStatement, "does not match any rows"),
        ("SELECT * FROM users WHERE city IS NULL", InvalidStatement, "does not match any rows"),
        ("SELECT cdc_prev() FROM users", UndefinedFunction, "unknown function: cdc_prev()"),
        ("SELECT upper(id) FROM users", UndefinedFunction, "unknown signature: upper(int)"),
        ("SELECT nope FROM users", UndefinedColumn, 'column "nope" does not exist'),
        ("SELECT * FROM users WHERE cdc_prev.name = 'x'", ChangefeedError, "(cdc_prev).x"),
        ("SELECT DISTINCT id FROM users", StatementSyntaxError, "'DISTINCT': a reserved keyword"),
        ("SELECT * FROM users ORDER BY id", StatementSyntaxError, "unexpected 'ORDER'"),
    ],
)
def test_refusals_are_cockroachdbs(conn: changefeed.Connection, query: str, error: type, text: str) -> None:
    for stmt in (f"CREATE CHANGEFEED AS {query}", f"CREATE CHANGEFEED INTO 'topics://' AS {query}"):
        with pytest.raises(error) as e:
            if "INTO" in stmt:
                conn.execute(stmt)
            else:
                conn.stream(stmt)
        assert text in str(e.value)
    assert conn.execute("SHOW CHANGEFEED JOBS").rows == []  # a refused statement leaves nothing


def test_query_job_description_and_alter(conn: changefeed.Connection) -> None:
    (job_id,) = conn.execute(
        "CREATE CHANGEFEED INTO 'topics://' WITH updated, diff AS SELECT name, city FROM users WHERE city = 'x'"
    ).rows[0]
    (row,) = conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows
    assert row[1] == (
        "CREATE CHANGEFEED INTO 'topics://' WITH OPTIONS (diff, updated) "
        "AS SELECT name, city FROM users WHERE city = 'x'"
    )
    conn.execute(f"PAUSE JOB {job_id}")
    conn.execute("CREATE TABLE other (id INT PRIMARY KEY)")
    with pytest.raises(InvalidStatement, match="cannot modify targets when using CDC query changefeed"):
        conn.execute(f"ALTER CHANGEFEED {job_id} ADD other")
    conn.execute(f"ALTER CHANGEFEED {job_id} UNSET diff")  # options may change


def test_external_connections(conn: changefeed.Connection) -> None:
    conn.execute("CREATE EXTERNAL CONNECTION sink AS 'topics://?topic_prefix=x_'")
    with pytest.raises(ChangefeedError, match="external connection with connection name sink already exists"):
        conn.execute("CREATE EXTERNAL CONNECTION sink AS 'topics://'")
    conn.execute("CREATE EXTERNAL CONNECTION IF NOT EXISTS sink AS 'topics://'")
    (job_id,) = conn.execute("CREATE CHANGEFEED INTO 'external://sink' AS SELECT name FROM users").rows[0]
    row = conn.execute(f"SHOW CHANGEFEED JOB {job_id}").rows[0]
    assert row[1].startswith("CREATE CHANGEFEED INTO 'external://sink' AS SELECT")
    assert "x_users" in row
    with pytest.raises(ChangefeedError, match="external connection with name nope does not exist"):
        conn.execute("CREATE CHANGEFEED INTO 'external://nope' AS SELECT name FROM users")
    conn.execute("DROP EXTERNAL CONNECTION sink")
    with pytest.raises(ChangefeedError, match="does not exist"):
        conn.execute("DROP EXTERNAL CONNECTION sink")


# ------------------------------------------------------------------------------------ semantics
def test_projection_predicate_casts_and_functions(conn: changefeed.Connection) -> None:
    conn.execute(
        "INSERT INTO users (id, name, city, score, f, born, seen, tags) VALUES"
        " (1, 'Ann', 'rome', 12.50, 0.5, '2001-02-03', '2024-01-02 03:04:05+00', '{\"a\": [1, 2]}'),"
        " (2, 'bob', 'oslo', NULL, NULL, NULL, NULL, NULL), (3, 'Cy', 'rome', 3.00, 2, NULL, NULL, NULL)"
    )
    got = _all(
        conn,
        "CREATE CHANGEFEED WITH initial_scan = 'only' AS SELECT id, upper(name) AS n, score * 2 AS s2,"
        " score::string || '!' AS t, f::int AS fi, extract(year FROM born) AS y, seen::date AS d,"
        " tags->'a' AS a, coalesce(name, '?') || ' of ' || city AS who,"
        " CASE WHEN score > 10 THEN 'big' ELSE 'small' END AS size"
        " FROM users WHERE city = 'rome' AND id < 3",
    )
    assert got == [
        (
            "users",
            b"[1]",
            {
                "a": [1, 2],
                "d": "2024-01-02",
                "fi": 0,
                "id": 1,
                "n": "ANN",
                "s2": Decimal("25.00"),
                "size": "big",
                "t": "12.50!",
                "who": "Ann of rome",
                "y": 2001,
            },
        )
    ]


def test_cdc_prev_event_op_deletes_and_diff(conn: changefeed.Connection, tmp_path: Path) -> None:
    writer = changefeed.connect(tmp_path / "db")
    feed = conn.stream(
        "CREATE CHANGEFEED WITH no_initial_scan AS SELECT id, name, event_op() AS op,"
        " (cdc_prev).name AS was, cdc_prev IS NULL AS fresh FROM users"
    )
    with feed:
        writer.execute("INSERT INTO users (id, name, city) VALUES (1, 'a', 'x')")
        writer.execute("UPDATE users SET name = 'b' WHERE id = 1")
        writer.execute("DELETE FROM users WHERE id = 1")
        got = _take(feed, 3)
    assert [v for _, _, v in got] == [
        {"fresh": True, "id": 1, "name": "a", "op": "insert", "was": None},
        {"fresh": False, "id": 1, "name": "b", "op": "update", "was": "a"},
        # a delete carries its key; the other columns read NULL (cdc_prev has them)
        {"fresh": False, "id": 1, "name": None, "op": "delete", "was": "b"},
    ]
    # without diff (and no cdc_prev), event_op() cannot tell an insert from an update
    with conn.stream("CREATE CHANGEFEED WITH no_initial_scan AS SELECT event_op() AS op FROM users") as feed:
        writer.execute("INSERT INTO users (id, name, city) VALUES (2, 'a', 'x')")
        writer.execute("DELETE FROM users WHERE id = 2")
        assert [v for _, _, v in _take(feed, 2)] == [{"op": "upsert"}, {"op": "delete"}]
    # wrapped + diff: the delete's before is the whole previous row, not the projection
    with conn.stream(
        "CREATE CHANGEFEED WITH no_initial_scan, envelope = 'wrapped', diff AS SELECT name FROM users"
    ) as feed:
        writer.execute("INSERT INTO users (id, name, city) VALUES (3, 'c', 'y')")
        writer.execute("DELETE FROM users WHERE id = 3")
        got = _take(feed, 2)
    whole = {
        "born": None,
        "city": "y",
        "f": None,
        "id": 3,
        "name": "c",
        "score": None,
        "seen": None,
        "tags": None,
    }
    assert [v for _, _, v in got] == [
        {"after": {"name": "c"}, "before": None},
        {"after": None, "before": whole},
    ]
    writer.close()


def test_timestamps_initial_scan_modes_and_cursor(conn: changefeed.Connection, tmp_path: Path) -> None:
    conn.execute("INSERT INTO users (id, name, city) VALUES (1, 'a', 'x')")
    scan = _all(
        conn,
        "CREATE CHANGEFEED WITH initial_scan = 'only' AS SELECT id,"
        " crdb_internal_mvcc_timestamp AS m, event_schema_timestamp() AS s,"
        " changefeed_creation_timestamp() AS c, event_op() AS op FROM users",
    )
    ((_, _, v),) = scan
    # a scan row: its timestamps are the scan's (the row store keeps no per-row MVCC timestamp)
    assert v["op"] == "upsert" and v["m"] == v["s"] == v["c"]
    mid = conn.db.last_ts()
    conn.execute("UPDATE users SET name = 'b' WHERE id = 1")
    conn.execute("INSERT INTO users (id, name, city) VALUES (2, 'c', 'x')")
    # cursor: the changes after it, no scan
    with conn.stream(f"CREATE CHANGEFEED WITH cursor = '{mid.crdb()}' AS SELECT id, name FROM users") as feed:
        assert [v for _, _, v in _take(feed, 2)] == [{"id": 1, "name": "b"}, {"id": 2, "name": "c"}]
    # initial_scan = 'no' / 'yes'
    with conn.stream("CREATE CHANGEFEED WITH initial_scan = 'no' AS SELECT id FROM users") as feed:
        conn.execute("INSERT INTO users (id, name, city) VALUES (3, 'd', 'x')")
        assert [v for _, _, v in _take(feed, 1)] == [{"id": 3}]
    assert len(_all(conn, "CREATE CHANGEFEED WITH initial_scan = 'only' AS SELECT id FROM users")) == 3


def test_outbox_example_event_timestamp(conn: changefeed.Connection) -> None:
    """The document's outbox statement (sinkless): event_schema_timestamp()::int, a constant
    named ``table``, event_op() and jsonb_build_object()."""
    conn.execute("CREATE TABLE dogs (id INT PRIMARY KEY, good_boy BOOL)")
    conn.execute("INSERT INTO dogs (id, good_boy) VALUES (1, true)")
    got = _all(
        conn,
        "CREATE CHANGEFEED WITH initial_scan = 'only' AS SELECT\n"
        "event_schema_timestamp()::int AS event_timestamp,\n'dogs' AS table,\nevent_op() AS type,\n"
        "jsonb_build_object('good_boy',good_boy) AS data\nFROM dogs",
    )
    ((_, _, v),) = got
    assert set(v) == {"event_timestamp", "table", "type", "data"}
    assert abs(v["event_timestamp"] - time.time_ns()) < 600 * 10**9
    assert (v["table"], v["type"], v["data"]) == ("dogs", "upsert", {"good_boy": True})


def test_pg_endpoint_streams_a_query(tmp_path: Path) -> None:
    psycopg = pytest.importorskip("psycopg")
    from tests.pg_server import start_server

    db = tmp_path / "db"
    c = changefeed.connect(db)
    c.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    c.execute("INSERT INTO t (id, v) VALUES (1, 'one'), (2, 'two')")
    c.close()
    server = start_server(db)
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as pg:
            rows = pg.execute(
                "CREATE CHANGEFEED WITH initial_scan = 'only' AS SELECT upper(v) AS v FROM t WHERE id > 1"
            ).fetchall()
            assert rows == [("t", b"[2]", b'{"v": "TWO"}')]
            with pytest.raises(psycopg.Error) as e:
                pg.execute("CREATE CHANGEFEED AS SELECT now() FROM t")
            assert e.value.sqlstate == "42883" and 'function "now" unsupported by CDC' in str(e.value)
    finally:
        server.stop()


def test_python_evaluator_matches_sql_three_valued_logic(conn: changefeed.Connection) -> None:
    rows = [(i, n, c) for i, (n, c) in enumerate(itertools.product(["a", None], ["x", "y"]))]
    for i, n, c in rows:
        conn.execute("INSERT INTO users (id, name, city) VALUES (?, ?, ?)", (i, n, c))
    got = _all(
        conn,
        "CREATE CHANGEFEED WITH initial_scan = 'only' AS SELECT id FROM users"
        " WHERE NOT (name = 'a' AND city = 'x') OR name IS NULL AND city = 'y'",
    )
    # NOT (NULL AND ..) is NULL unless the other conjunct is false: rows dropped as SQL drops them
    assert sorted(v["id"] for _, _, v in got) == [1, 3]
