"""Commit groups (``engine.commit_group``): several autocommit transactions committed as one
SQLite transaction, each still its own transaction in every way a client or a changefeed sees;
and the PostgreSQL endpoint's use of them for its sessions' short autocommit writes
(``server.pg.write_group``)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import pytest

import changefeed
from changefeed.engine.changes import read_changes
from changefeed.engine.commit_group import CommitGroup
from changefeed.engine.database import Database
from changefeed.exceptions import ChangefeedError, DatabaseError, LockNotAvailable
from changefeed.server.pg import cluster
from changefeed.server.pg.write_group import WriteGroup
from changefeed.sql.parser import parse
from changefeed.sql.statements import open_session
from tests.pg_server import RunningServer, start_server


def _changes(db: Database) -> list[dict[str, object]]:
    """The changes after the fixture's first row."""
    db.refresh_catalog()
    schema = db.find_table("t")
    assert schema is not None
    return list(read_changes(db.conn, schema, 1, 1 << 62).to_pylist())


def _ids(db: Database) -> list[int]:
    (stmt,) = parse("SELECT id FROM t ORDER BY id", "sql")
    return [int(r[0]) for r in open_session(db).execute(stmt).rows]


@pytest.fixture
def dbs(tmp_path: Path) -> Iterator[tuple[Database, Database]]:
    """The group's connection and another one (a reader, a writer that competes for the gate)."""
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
        conn.execute("INSERT INTO t VALUES (1, 'one')")
    group_db, other = Database(tmp_path / "db"), Database(tmp_path / "db")
    group_db.writers_wait = False
    try:
        yield group_db, other
    finally:
        group_db.close()
        other.close()


def _run(db: Database, sql: str) -> None:
    (stmt,) = parse(sql, "sql")
    open_session(db).execute(stmt)


def test_members_commit_together_each_as_its_own_transaction(dbs: tuple[Database, Database]) -> None:
    db, other = dbs
    group = CommitGroup.begin(db)
    _run(db, "INSERT INTO t VALUES (2, 'two')")
    with pytest.raises(ChangefeedError) as dup:
        _run(db, "INSERT INTO t VALUES (3, 'three'), (1, 'dup')")  # fails alone, all of it
    assert dup.value.code == "23505"
    _run(db, "UPSERT INTO t VALUES (1, 'uno')")
    _run(db, "DELETE FROM t WHERE id = 2")
    # nothing is visible before the group commits
    assert _ids(other) == [1]
    ticket = group.commit()
    assert db.group is None
    assert ticket >= 0
    assert _ids(other) == [1]
    changes = _changes(other)
    # three transactions committed (the failed one left nothing): three changes (key, whether
    # it had a row before), each its own transaction id and a later commit timestamp than the
    # one before, in the order they ran
    assert [(c["c0"], c["ox"]) for c in changes] == [(2, False), (1, True), (2, True)]
    stamps = [(c["ts"], c["lg"]) for c in changes]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3
    txs = [int(str(c["tx"])) for c in changes]
    assert txs == [txs[0], txs[0] + 1, txs[0] + 2]  # the failed member's id was given back
    # the group wrote the clock back: a later transaction comes after every member
    _run(other, "INSERT INTO t VALUES (5, 'five')")
    (last,) = _changes(other)[3:]
    assert (last["ts"], last["lg"]) > stamps[-1] and last["tx"] == txs[-1] + 1


def test_a_rolled_back_group_leaves_nothing(dbs: tuple[Database, Database]) -> None:
    db, other = dbs
    group = CommitGroup.begin(db)
    _run(db, "INSERT INTO t VALUES (2, 'two')")
    group.rollback()
    assert db.group is None and not db.conn.in_transaction
    assert _ids(other) == [1]
    assert [c["c0"] for c in _changes(other)] == []
    # and the gate is free again
    _run(other, "INSERT INTO t VALUES (2, 'two')")


def test_a_group_waits_for_no_one(dbs: tuple[Database, Database]) -> None:
    db, other = dbs
    other.conn.execute("BEGIN IMMEDIATE")  # a writer of another process holds SQLite's lock
    try:
        with pytest.raises(LockNotAvailable):
            CommitGroup.begin(db)
        assert db.group is None and not db.conn.in_transaction
    finally:
        other.conn.execute("ROLLBACK")
    group = CommitGroup.begin(db)
    with pytest.raises(DatabaseError):
        CommitGroup.begin(db)  # one at a time on a connection
    group.rollback()


def test_a_group_whose_transaction_ended_under_it_commits_nothing(dbs: tuple[Database, Database]) -> None:
    db, other = dbs
    group = CommitGroup.begin(db)
    _run(db, "INSERT INTO t VALUES (2, 'two')")
    # What SQLite does on SQLITE_FULL or an I/O error in a statement: the whole transaction ends.
    db.conn.execute("ROLLBACK")
    with pytest.raises(DatabaseError) as ended:
        _run(db, "INSERT INTO t VALUES (3, 'three')")  # would otherwise commit on its own
    assert "nothing of it is committed" in str(ended.value)
    with pytest.raises(DatabaseError):
        group.commit()
    assert db.group is None
    assert _ids(other) == [1]
    assert _changes(other) == []
    _run(other, "INSERT INTO t VALUES (4, 'four')")  # the gate was released


def test_a_failing_commit_fails_every_member(dbs: tuple[Database, Database]) -> None:
    db, other = dbs
    group = CommitGroup.begin(db)
    _run(db, "INSERT INTO t VALUES (2, 'two')")
    real = db.conn

    class FailingCommit:
        in_transaction = True

        def execute(self, sql: str, *args: object) -> object:
            if sql == "COMMIT":
                raise sqlite3.OperationalError("disk I/O error")
            return real.execute(sql, *args)

    db.conn = FailingCommit()  # type: ignore[assignment]
    try:
        with pytest.raises(sqlite3.OperationalError):
            group.commit()
    finally:
        db.conn = real
    assert db.group is None and not real.in_transaction
    assert _ids(other) == [1]


# --------------------------------------------------------------------------- through pg
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    db = tmp_path_factory.mktemp("group") / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE kv (k INT PRIMARY KEY, v STRING)")
        conn.execute("CREATE USER reader WITH PASSWORD 'pw'")
        conn.execute("GRANT SELECT ON kv TO reader")
    # One process serves every session, so that they share its commit groups (and the test
    # can read the group's figures); two workers each group their own sessions the same way.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(cluster.WORKERS_ENV, "1")
        srv = start_server(db)
    yield srv
    srv.stop()


def test_concurrent_autocommit_writes_commit_in_groups(server: RunningServer) -> None:
    """Sessions of one process writing at once share commits; each statement still succeeds or
    fails alone, and everything acknowledged is there, exactly once in the change stream."""
    sessions, rounds = 8, 60

    async def main() -> list[tuple[int, str]]:
        conns = [
            await asyncpg.connect(
                host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
            )
            for _ in range(sessions)
        ]
        try:

            async def client(i: int) -> list[tuple[int, str]]:
                done: list[tuple[int, str]] = []
                for r in range(rounds):
                    k = i * 1000 + r
                    await conns[i].execute("INSERT INTO kv (k, v) VALUES ($1, $2)", k, f"s{i}")
                    done.append((k, "insert"))
                    if r % 10 == 0:  # a duplicate key: 23505, for this statement alone
                        with pytest.raises(asyncpg.UniqueViolationError):
                            await conns[i].execute("INSERT INTO kv (k, v) VALUES ($1, 'dup')", k)
                    if r % 7 == 0:
                        tag = await conns[i].execute("UPDATE kv SET v = 'upd' WHERE k = $1", k)
                        assert tag == "UPDATE 1"
                        done.append((k, "update"))
                    if r % 13 == 0:
                        rows = await conns[i].fetch("DELETE FROM kv WHERE k = $1 RETURNING k, v", k)
                        assert [tuple(x) for x in rows] == [(k, "upd" if r % 7 == 0 else f"s{i}")]
                        done.append((k, "delete"))
                return done

            results = await asyncio.gather(*(client(i) for i in range(sessions)))
            return [x for res in results for x in res]
        finally:
            for c in conns:
                await c.close()

    done = asyncio.run(main())
    deleted = {k for k, what in done if what == "delete"}
    with changefeed.connect(server.db) as conn:
        rows = dict(conn.execute("SELECT k, v FROM kv WHERE k < 100000").rows)
        assert set(rows) == {k for k, what in done if what == "insert"} - deleted
        schema = conn.db.find_table("kv")
        assert schema is not None
        changes = read_changes(conn.db.conn, schema, 0, 1 << 62).to_pylist()
    # one change per acknowledged statement (each its own transaction), none for the failures
    assert len(changes) == len(done)
    assert len({c["tx"] for c in changes}) == len(done)
    per_key: dict[int, list[bool]] = {}
    for c in changes:
        per_key.setdefault(int(c["c0"]), []).append(bool(c["ox"]))
    for k, what in done:
        if what == "insert":
            assert per_key[k][0] is False
    # the sessions' statements did share commits
    writes = server.endpoint.server.writes  # type: ignore[attr-defined]
    assert writes.statements > writes.commits > 0


def test_explicit_transactions_stay_out_of_commit_groups(server: RunningServer) -> None:
    """A statement inside BEGIN .. COMMIT is its transaction's, never a commit group's (a group
    would commit it at once: another session would see it, and a ROLLBACK would leave it), in a
    process whose other sessions write in groups."""

    async def main() -> None:
        conns = [
            await asyncpg.connect(
                host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
            )
            for _ in range(3)
        ]
        a, b, watcher = conns
        try:
            for round_ in range(5):
                base = 200_000 + round_ * 10
                await b.execute("INSERT INTO kv (k, v) VALUES ($1, 'autocommit')", base + 1)
                tx = a.transaction()
                await tx.start()
                await a.execute("INSERT INTO kv (k, v) VALUES ($1, 'in txn')", base)
                await a.execute("UPDATE kv SET v = 'in txn' WHERE k = $1", base + 1)
                await a.execute("INSERT INTO kv (k, v) VALUES ($1, 'in txn')", base + 2)
                seen = await watcher.fetch(
                    "SELECT k, v FROM kv WHERE k >= $1 AND k < $2 ORDER BY k", base, base + 10
                )
                assert [tuple(r) for r in seen] == [(base + 1, "autocommit")], "a write seen before COMMIT"
                await tx.rollback()
                left = await watcher.fetch(
                    "SELECT k, v FROM kv WHERE k >= $1 AND k < $2 ORDER BY k", base, base + 10
                )
                assert [tuple(r) for r in left] == [(base + 1, "autocommit")], "a rolled-back write stayed"
        finally:
            for c in conns:
                await c.close()

    asyncio.run(main())


def test_each_statement_of_a_group_is_checked_against_its_own_user(server: RunningServer) -> None:
    """A group runs several sessions' statements on one connection: each under its own user."""

    async def main() -> None:
        def connect(user: str, password: str | None = None) -> Any:
            return asyncpg.connect(
                host=server.host,
                port=server.port,
                user=user,
                password=password,
                database="defaultdb",
                ssl=False,
            )

        root = [await connect("root") for _ in range(3)]
        reader = await connect("reader", "pw")
        try:
            before = server.endpoint.server.writes.commits  # type: ignore[attr-defined]

            async def denied(r: int) -> None:
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await reader.execute("UPSERT INTO kv (k, v) VALUES ($1, 'no')", 900_000 + r)

            for r in range(20):
                await asyncio.gather(
                    denied(r),
                    *(
                        c.execute("UPSERT INTO kv (k, v) VALUES ($1, 'yes')", 800_000 + 10 * r + i)
                        for i, c in enumerate(root)
                    ),
                )
            assert server.endpoint.server.writes.commits > before  # type: ignore[attr-defined]
            got = await root[0].fetch("SELECT k, v FROM kv WHERE k >= 800000 ORDER BY k")
            assert [tuple(x) for x in got] == [
                (800_000 + 10 * r + i, "yes") for r in range(20) for i in range(3)
            ]
        finally:
            for c in [*root, reader]:
                await c.close()

    asyncio.run(main())


def test_a_group_that_cannot_open_its_database_fails_its_statements(tmp_path: Path) -> None:
    """Whatever goes wrong in a group, its sessions get an answer: never a wait forever."""
    not_a_database = tmp_path / "file"
    not_a_database.write_text("not a directory")
    (stmt,) = parse("INSERT INTO t VALUES (1, 'one')", "sql")

    async def main() -> None:
        with ThreadPoolExecutor(1) as pool:
            group = WriteGroup(not_a_database, pool)
            with changefeed.connect(tmp_path / "db") as conn, pytest.raises(ChangefeedError):
                await asyncio.wait_for(group.run("root", stmt, (), conn.db), 10)
            await group.close()

    asyncio.run(main())
