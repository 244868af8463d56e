"""UPDATE of primary key columns (SQL tables), as CockroachDB runs it: the row moves, and every
changefeed carries a delete of the old key and the row under the new one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.exceptions import InvalidStatement, NotNullViolation, UniqueViolation


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Connection]:
    with changefeed.connect(tmp_path / "db") as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING, tenfold INT AS (id * 10) STORED)")
        c.execute("INSERT INTO t (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c')")
        yield c


def rows(conn: Connection, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(sql).rows]


def test_rows_move_together(conn: Connection) -> None:
    res = conn.execute("UPDATE t SET id = id + 1 RETURNING id, v, tenfold")
    assert sorted(res.rows) == [(2, "a", 20), (3, "b", 30), (4, "c", 40)]
    assert rows(conn, "SELECT * FROM t ORDER BY id") == [(2, "a", 20), (3, "b", 30), (4, "c", 40)]
    conn.execute("UPDATE t SET id = 10, v = 'moved' WHERE id = 3")
    assert rows(conn, "SELECT * FROM t ORDER BY id") == [(2, "a", 20), (4, "c", 40), (10, "moved", 100)]


def test_taken_keys_and_nulls_change_nothing(conn: Connection) -> None:
    with pytest.raises(UniqueViolation) as taken:
        conn.execute("UPDATE t SET id = 3 WHERE id = 1")
    assert taken.value.detail == "Key (id)=(3) already exists."
    with pytest.raises(UniqueViolation):  # two rows to one key
        conn.execute("UPDATE t SET id = 7 WHERE id > 1")
    with pytest.raises(UniqueViolation):  # onto a row the statement updates in place
        conn.execute("UPDATE t SET id = CASE WHEN id = 1 THEN 2 ELSE id END, v = 'x'")
    with pytest.raises(NotNullViolation):
        conn.execute("UPDATE t SET id = NULL WHERE id = 1")
    assert rows(conn, "SELECT id, v FROM t ORDER BY id") == [(1, "a"), (2, "b"), (3, "c")]


def test_cql_refuses_as_scylladb(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db", dialect="cql") as c:
        c.execute(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        c.execute("CREATE TABLE ks.t (id int PRIMARY KEY, v text)")
        with pytest.raises(InvalidStatement, match="PRIMARY KEY part id found in SET part"):
            c.execute("UPDATE ks.t SET id = 2 WHERE id = 1")


def test_a_changefeed_sees_a_delete_and_the_moved_row(conn: Connection) -> None:
    got: list[tuple[Any, Any]] = []
    done = threading.Event()
    with conn.stream("EXPERIMENTAL CHANGEFEED FOR t WITH diff") as feed:

        def pump() -> None:
            for table, key, value in feed:
                if table is None:
                    continue
                got.append((json.loads(key), json.loads(value) if value is not None else None))
                if len(got) >= 5:
                    break
            done.set()

        threading.Thread(target=pump, daemon=True).start()
        with changefeed.connect(conn.path) as writer:
            writer.execute("UPDATE t SET id = 20 WHERE id = 2")
        assert done.wait(20), got
    expected = [
        ([1], {"after": {"id": 1, "tenfold": 10, "v": "a"}, "before": None}),
        ([2], {"after": {"id": 2, "tenfold": 20, "v": "b"}, "before": None}),
        ([3], {"after": {"id": 3, "tenfold": 30, "v": "c"}, "before": None}),
        ([2], {"after": None, "before": {"id": 2, "tenfold": 20, "v": "b"}}),
        ([20], {"after": {"id": 20, "tenfold": 200, "v": "b"}, "before": None}),
    ]
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    # CockroachDB orders a key's messages, not different keys': key 2's scan comes before its delete
    assert [m for m in got if m[0] == [2]] == [expected[1], expected[3]]


def test_ydb_tables_refuse_as_ydb(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as c:
        c.execute("CREATE TABLE y (id Uint64, v Utf8, PRIMARY KEY (id))")
        c.execute("UPSERT INTO y (id, v) VALUES (1, 'a')")
        with pytest.raises(InvalidStatement, match="Cannot update primary key column: id"):
            c.execute("UPDATE y SET id = 2 WHERE id = 1")
