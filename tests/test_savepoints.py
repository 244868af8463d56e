"""``SAVEPOINT``, ``RELEASE SAVEPOINT`` and ``ROLLBACK TO SAVEPOINT``: in the engine, and through
the PostgreSQL endpoint as clients use them (psycopg's and asyncpg's nested transactions,
CockroachDB's ``cockroach_restart`` retry protocol). The change stream under random savepoints
is checked in ``test_engine_random.py``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest

import changefeed
from changefeed.engine.changes import read_changes
from changefeed.exceptions import ChangefeedError, InvalidSavepoint, NoActiveTransaction
from tests.pg_server import RunningServer, start_server


def test_rollback_to_undoes_rows_and_changes(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (1, 'kept')")
        conn.execute("SAVEPOINT a")
        conn.execute("INSERT INTO t VALUES (2, 'undone')")
        conn.execute("UPDATE t SET v = 'undone too' WHERE id = 1")
        conn.execute("SAVEPOINT b")
        conn.execute("DELETE FROM t WHERE id = 1")
        conn.execute("ROLLBACK TO SAVEPOINT a")  # b goes with it
        with pytest.raises(InvalidSavepoint) as gone:
            conn.execute("RELEASE SAVEPOINT b")
        assert gone.value.code == "3B001"
        conn.execute("ROLLBACK TO SAVEPOINT a")  # a stays after a rollback to it, and recovers
        conn.execute("INSERT INTO t VALUES (3, 'after')")
        conn.execute("RELEASE SAVEPOINT a")
        conn.execute("COMMIT")
        assert conn.execute("SELECT id, v FROM t ORDER BY id").rows == [(1, "kept"), (3, "after")]
        schema = conn.db.find_table("t")
        assert schema is not None
        changes = read_changes(conn.db.conn, schema, 0, 1 << 62).to_pylist()
        # one transaction: one change a key it left changed, with what it left (new rows, no
        # old image); nothing of key 2, the update or the delete that were rolled back
        assert sorted((c["c0"], c["c1"], c["ox"]) for c in changes) == [
            (1, "kept", False),
            (3, "after", False),
        ]
        assert len({c["tx"] for c in changes}) == 1


def test_a_failed_statement_is_undone_by_rollback_to(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
        conn.execute("INSERT INTO t VALUES (1, 'one')")
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT try_it")
        with pytest.raises(ChangefeedError) as dup:
            conn.execute("INSERT INTO t VALUES (2, 'two'), (1, 'dup')")
        assert dup.value.code == "23505"
        with pytest.raises(ChangefeedError) as aborted:
            conn.execute("SELECT 1")
        assert "aborted" in str(aborted.value)
        with pytest.raises(ChangefeedError):
            conn.execute("RELEASE SAVEPOINT try_it")  # only ROLLBACK [TO] in an aborted transaction
        conn.execute("ROLLBACK TO SAVEPOINT try_it")
        conn.execute("INSERT INTO t VALUES (2, 'second try')")
        conn.execute("COMMIT")
        assert conn.execute("SELECT id, v FROM t ORDER BY id").rows == [(1, "one"), (2, "second try")]


def test_savepoints_need_a_transaction_block(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        for sql in ("SAVEPOINT a", "RELEASE SAVEPOINT a", "ROLLBACK TO SAVEPOINT a"):
            with pytest.raises(NoActiveTransaction) as err:
                conn.execute(sql)
            assert err.value.code == "25P01"
        conn.execute("BEGIN")
        with pytest.raises(InvalidSavepoint):
            conn.execute("ROLLBACK TO SAVEPOINT never")
        conn.execute("ROLLBACK")


def test_a_name_taken_twice_means_the_latest(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT s")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute('SAVEPOINT "s"')
        conn.execute("INSERT INTO t VALUES (2)")
        conn.execute("ROLLBACK TO SAVEPOINT s")  # the second: row 1 stays
        conn.execute("RELEASE SAVEPOINT s")  # the second
        conn.execute("ROLLBACK TO SAVEPOINT s")  # the first: row 1 goes
        conn.execute("COMMIT")
        assert conn.execute("SELECT count(*) FROM t").rows == [(0,)]


# -------------------------------------------------------------------------------- over the wire
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = tmp_path_factory.mktemp("savepoints") / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)")
    srv = start_server(db)
    yield srv
    srv.stop()


def test_psycopg_nested_transactions(server: RunningServer) -> None:
    with psycopg.connect(server.dsn()) as conn:
        with conn.transaction():
            conn.execute("UPSERT INTO acct VALUES (1, 100)")
            with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction():
                conn.execute("INSERT INTO acct VALUES (2, 5)")
                conn.execute("INSERT INTO acct VALUES (1, 0)")  # fails: the inner block rolls back
            with conn.transaction():
                conn.execute("UPSERT INTO acct VALUES (3, 30)")
        rows = conn.execute("SELECT id, balance FROM acct ORDER BY id").fetchall()
        assert rows == [(1, 100), (3, 30)]
        conn.rollback()
        with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
            conn.autocommit = True
            conn.execute("SAVEPOINT nowhere")


def test_cockroach_restart_protocol(server: RunningServer) -> None:
    """CockroachDB's client-side retry: BEGIN; SAVEPOINT cockroach_restart; ..; on an error
    ROLLBACK TO SAVEPOINT cockroach_restart and try again; RELEASE SAVEPOINT; COMMIT."""
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("UPSERT INTO acct VALUES (10, 50), (11, 0)")
        conn.execute("BEGIN")
        conn.execute("SAVEPOINT cockroach_restart")
        attempts = 0
        while True:
            attempts += 1
            try:
                conn.execute("UPDATE acct SET balance = balance - 20 WHERE id = 10")
                if attempts == 1:
                    conn.execute("INSERT INTO acct VALUES (10, 0)")  # a failure to retry from
                conn.execute("UPDATE acct SET balance = balance + 20 WHERE id = 11")
                conn.execute("RELEASE SAVEPOINT cockroach_restart")
                break
            except psycopg.errors.UniqueViolation:
                status = conn.info.transaction_status
                assert status == psycopg.pq.TransactionStatus.INERROR
                conn.execute("ROLLBACK TO SAVEPOINT cockroach_restart")
        conn.execute("COMMIT")
        assert attempts == 2
        got = conn.execute("SELECT id, balance FROM acct WHERE id IN (10, 11) ORDER BY id").fetchall()
        assert got == [(10, 30), (11, 20)]


def test_asyncpg_nested_transactions(server: RunningServer) -> None:
    import asyncpg

    async def go() -> list[tuple[int, int]]:
        conn = await asyncpg.connect(
            host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
        )
        try:
            async with conn.transaction():
                await conn.execute("UPSERT INTO acct VALUES (20, 1)")
                try:
                    async with conn.transaction():  # a savepoint
                        await conn.execute("UPSERT INTO acct VALUES (21, 1)")
                        await conn.execute("INSERT INTO acct VALUES (20, 2)")
                except asyncpg.UniqueViolationError:
                    pass
                await conn.execute("UPSERT INTO acct VALUES (22, 1)")
            rows = await conn.fetch("SELECT id, balance FROM acct WHERE id >= 20 ORDER BY id")
            return [(r["id"], r["balance"]) for r in rows]
        finally:
            await conn.close()

    assert asyncio.run(go()) == [(20, 1), (22, 1)]


def test_rollback_to_restores_the_scylla_log_numbering(tmp_path: Path) -> None:
    """A table with ScyllaDB's CDC log: ``cdc$batch_seq_no`` of one transaction's log rows in a
    partition stay consecutive across rolled-back work, a savepoint released inside another is
    rolled back with it, and the log replays to the table with the right images."""
    from changefeed.testing.validators import check_scylla_images, check_scylla_replay

    db = tmp_path / "db"
    with changefeed.connect(db, dialect="cql") as cql:
        cql.execute(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        cql.execute(
            "CREATE TABLE ks.t (p int, c int, v text, PRIMARY KEY (p, c))"
            " WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
        )
    with changefeed.connect(db) as conn:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO ks.t (p, c, v) VALUES (1, 1, 'a'), (1, 2, 'b')")
        conn.execute("SAVEPOINT outer_sp")
        conn.execute("INSERT INTO ks.t (p, c, v) VALUES (1, 3, 'c')")
        conn.execute("SAVEPOINT inner_sp")
        conn.execute("UPDATE ks.t SET v = 'x' WHERE p = 1 AND c = 1")
        conn.execute("RELEASE SAVEPOINT inner_sp")  # its work stays with outer_sp's
        conn.execute("ROLLBACK TO SAVEPOINT outer_sp")
        conn.execute("INSERT INTO ks.t (p, c, v) VALUES (1, 4, 'd')")
        conn.execute("UPDATE ks.t SET v = 'y' WHERE p = 1 AND c = 2")
        conn.execute("RELEASE SAVEPOINT outer_sp")
        conn.execute("COMMIT")
    with changefeed.connect(db, dialect="cql") as cql:
        rows = cql.execute('SELECT "cdc$batch_seq_no", "cdc$operation", c, v FROM ks.t_scylla_cdc_log').rows
        assert [r[0] for r in rows] == list(range(9))
        assert [(r[1], r[2], r[3]) for r in rows] == [
            (2, 1, "a"),
            (9, 1, "a"),
            (2, 2, "b"),
            (9, 2, "b"),
            (2, 4, "d"),
            (9, 4, "d"),
            (0, 2, "b"),
            (1, 2, "y"),
            (9, 2, "y"),
        ]
        assert check_scylla_replay(cql, "ks.t").ok
        assert check_scylla_images(cql, "ks.t").ok
        assert cql.execute("SELECT c, v FROM ks.t WHERE p = 1").rows == [(1, "a"), (2, "y"), (4, "d")]


def test_a_savepoint_per_row_of_a_large_transaction(tmp_path: Path) -> None:
    """An error-tolerant bulk load (a savepoint around each row, some rows failing): every good
    row once in the change stream, none of the failed ones (and a savepoint costs the same at the
    last row as at the first: it copies nothing)."""
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
        conn.execute("INSERT INTO t VALUES (7, 'there before')")
        conn.execute("BEGIN")
        for i in range(3000):
            conn.execute("SAVEPOINT row")
            try:
                conn.execute("INSERT INTO t VALUES ($1, 'x')", (i,))
            except ChangefeedError:
                conn.execute("ROLLBACK TO SAVEPOINT row")  # the duplicate key 7
            conn.execute("RELEASE SAVEPOINT row")
            if i % 500 == 499:
                conn.execute("UPDATE t SET v = 'updated' WHERE id = $1", (i,))
        conn.execute("COMMIT")
        schema = conn.db.find_table("t")
        assert schema is not None
        changes = read_changes(conn.db.conn, schema, 1, 1 << 62).to_pylist()
        assert sorted(c["c0"] for c in changes) == [i for i in range(3000) if i != 7]
        assert len({c["tx"] for c in changes}) == 1
        assert {c["c0"]: c["c1"] for c in changes}[999] == "updated"
