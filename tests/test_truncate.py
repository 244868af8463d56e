"""SQL's ``TRUNCATE`` (PostgreSQL, CockroachDB): every row of each table named goes in the
statement's transaction, each row's delete a change like any other, so changefeeds carry the
deletes; nothing changes when a name, a privilege or a replica refuses it. CQL's TRUNCATE (no CDC
log entry, as ScyllaDB) is tested with the CQL endpoint (``test_cql_statements``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.exceptions import PermissionDenied, SyntaxError_, UndefinedTable
from tests.pg_server import run_psql, start_server


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Connection]:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    conn.execute("CREATE TABLE u (id INT PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    conn.execute("INSERT INTO u VALUES (1), (2)")
    yield conn
    conn.close()


def counts(conn: Connection) -> tuple[int, int]:
    return (
        conn.execute("SELECT count(*) FROM t").rows[0][0],
        conn.execute("SELECT count(*) FROM u").rows[0][0],
    )


def test_truncate_empties_every_table_named(db: Connection) -> None:
    res = db.execute("TRUNCATE t, u")
    assert res.status == "TRUNCATE TABLE"
    assert counts(db) == (0, 0)
    db.execute("INSERT INTO t VALUES (1, 'again')")  # the table goes on as before
    assert db.execute("SELECT * FROM t").rows == [(1, "again")]


@pytest.mark.parametrize(
    "stmt",
    [
        "TRUNCATE TABLE t",
        "TRUNCATE ONLY t",
        "TRUNCATE t *",
        "TRUNCATE t, t",
        "TRUNCATE public.t RESTART IDENTITY",
        "TRUNCATE t CONTINUE IDENTITY CASCADE",
        "truncate table t restrict",
    ],
)
def test_postgresql_forms(db: Connection, stmt: str) -> None:
    db.execute(stmt)
    assert counts(db) == (0, 2)


def test_truncate_is_transactional(db: Connection) -> None:
    with pytest.raises(RuntimeError), db.transaction():
        db.execute("TRUNCATE t")
        assert counts(db) == (0, 2)
        raise RuntimeError("roll back")
    assert counts(db) == (3, 2)


@pytest.mark.parametrize(
    ("stmt", "error", "match"),
    [
        ("TRUNCATE t, nope", UndefinedTable, 'table "nope" does not exist'),
        ("TRUNCATE", SyntaxError_, "unexpected end of input"),
        ("TRUNCATE t WHERE id = 1", SyntaxError_, "unexpected 'WHERE'"),
    ],
)
def test_refused_truncation_changes_nothing(
    db: Connection, stmt: str, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        db.execute(stmt)
    assert counts(db) == (3, 2)


def test_truncate_needs_the_drop_privilege(db: Connection, tmp_path: Path) -> None:
    """CockroachDB asks for DROP on each table; DELETE is not enough."""
    db.execute("CREATE USER w")
    db.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE t TO w")
    db.execute("GRANT ALL ON TABLE u TO w")
    with changefeed.connect(tmp_path / "db", user="w") as w:
        with pytest.raises(PermissionDenied, match="DROP") as info:
            w.execute("TRUNCATE u, t")
        assert info.value.code == "42501"
        assert counts(db) == (3, 2)  # u, named first and allowed, kept its rows too
        db.execute("GRANT DROP ON TABLE t TO w")
        w.execute("TRUNCATE u, t")
    assert counts(db) == (0, 0)


def test_changefeeds_carry_a_delete_per_row(db: Connection, tmp_path: Path) -> None:
    """A core changefeed (and so every feed of the change stream) sees each truncated row go."""
    writer = changefeed.connect(tmp_path / "db")
    with db.stream("EXPERIMENTAL CHANGEFEED FOR t") as feed:
        scanned = sorted(next(feed)[1] for _ in range(3))
        assert scanned == [b"[1]", b"[2]", b"[3]"]
        writer.execute("TRUNCATE t")
        writer.execute("INSERT INTO t VALUES (9, 'after')")
        msgs = [next(feed) for _ in range(4)]
    writer.close()
    assert sorted((k, json.loads(v)) for _, k, v in msgs[:3]) == [
        (b"[1]", {"after": None}),
        (b"[2]", {"after": None}),
        (b"[3]", {"after": None}),
    ]
    assert msgs[3] == ("t", b"[9]", b'{"after": {"id": 9, "v": "after"}}')


def test_a_cql_table_truncated_through_sql_logs_its_partition_deletes(tmp_path: Path) -> None:
    """Through SQL a truncation is a delete like any other, in the table's ScyllaDB CDC log too
    (one partition delete each); through CQL the log does not show it, as in ScyllaDB."""
    with changefeed.connect(tmp_path / "db", dialect="cql") as cql:
        cql.execute(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        cql.execute(
            "CREATE TABLE ks.c (pk int, ck int, v int, s int static, PRIMARY KEY (pk, ck))"
            " WITH cdc = {'enabled': true}"
        )
        for pk in range(2):
            cql.execute(f"INSERT INTO ks.c (pk, ck, v, s) VALUES ({pk}, 1, 1, 7)")
        before = cql.execute("SELECT count(*) FROM ks.c_scylla_cdc_log").rows[0][0]
        with changefeed.connect(tmp_path / "db") as sql:
            sql.execute("TRUNCATE ks.c")
        assert cql.execute("SELECT * FROM ks.c").rows == []
        ops = cql.execute('SELECT pk, "cdc$operation" FROM ks.c_scylla_cdc_log').rows
        assert len(ops) == before + 2
        assert sorted(op for op in ops if op[1] == 4) == [(0, 4), (1, 4)]  # partition_delete
        cql.execute("INSERT INTO ks.c (pk, ck, v) VALUES (5, 1, 1)")
        cql.execute("TRUNCATE ks.c")
        assert cql.execute("SELECT count(*) FROM ks.c_scylla_cdc_log").rows[0][0] == before + 3


def test_through_the_postgresql_endpoint(tmp_path: Path) -> None:
    """psycopg sees PostgreSQL's command tag and SQLSTATEs; psql prints ``TRUNCATE TABLE``."""
    server = start_server(tmp_path / "db")
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE TABLE p (id INT PRIMARY KEY)")
            conn.execute("INSERT INTO p VALUES (1), (2)")
            cur = conn.execute("TRUNCATE p")
            assert cur.statusmessage == "TRUNCATE TABLE"
            assert cur.rowcount == -1
            with pytest.raises(psycopg.errors.UndefinedTable):
                conn.execute("TRUNCATE p, nope")
            with conn.transaction():
                conn.execute("INSERT INTO p VALUES (3)")
                conn.execute("TRUNCATE TABLE p")
                conn.execute("INSERT INTO p VALUES (4)")
            assert conn.execute("SELECT id FROM p").fetchall() == [(4,)]
        out = run_psql(server, "-c", "TRUNCATE p", timeout=30)
        assert out.stdout.strip() == "TRUNCATE TABLE"
    finally:
        server.stop()
