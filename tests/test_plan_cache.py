"""Compiled single-row writes (``Session`` plans, :data:`changefeed.sql.session.PlanOne`).

A single-row ``INSERT``/``UPSERT``/``REPLACE`` of parameters and literals is compiled once per
session, catalog version and keyspace, and then run with each new set of parameters without
resolving, checking privileges or mapping columns again. These tests hold the plan to what the
statement means at each run: the same rows and change log as the statement run the long way,
and a new plan whenever a DDL, GRANT/REVOKE, a rolled-back catalog change or ``USE`` changed
what the text means."""

from __future__ import annotations

import asyncio
import decimal
import random
from pathlib import Path

import asyncpg
import pytest

import changefeed
from changefeed import exceptions as exc
from changefeed.engine.changes import read_changes
from changefeed.server.pg import cluster
from changefeed.sql.evaluator import Params
from changefeed.sql.parser import parse
from tests.pg_server import start_server


def test_a_plan_is_made_once_and_reused(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    before = conn.session.plans_made
    for i in range(50):
        res = conn.execute("UPSERT INTO t (id, v) VALUES ($1, 'x')", (i % 10,))
        assert (res.status, res.rowcount) == ("UPSERT 1", 1)
    for i in range(10, 20):
        assert conn.execute("INSERT INTO t (id, v) VALUES ($1, $2)", (i, str(i))).status == "INSERT 1"
    assert conn.session.plans_made - before == 2
    assert conn.execute("SELECT count(*) FROM t").rows == [(20,)]


def test_plans_past_the_limit_drop_the_one_used_longest_ago(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A working set one plan past the limit replans only what it evicts, not everything."""
    from changefeed.sql import session as engine_session

    monkeypatch.setattr(engine_session, "PLANS_KEPT", 4)
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    texts = [f"UPSERT INTO t (id, v) VALUES ($1, 'v{k}')" for k in range(5)]
    stmts = [parse(t, "sql")[0] for t in texts]
    hot = stmts[0]
    for s in stmts:  # five plans into four places: the first is dropped
        conn.session.execute(hot, (0,))
        conn.session.execute(s, (1,))
    before = conn.session.plans_made
    for _ in range(3):
        conn.session.execute(hot, (0,))  # used all along: still there
    assert conn.session.plans_made == before
    conn.close()


def test_errors_are_the_statements_own(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    conn.execute("INSERT INTO t (id, v) VALUES ($1, 'a')", (1,))
    with pytest.raises(exc.UniqueViolation, match='unique constraint "t_pkey"') as got:
        conn.execute("INSERT INTO t (id, v) VALUES ($1, 'a')", (1,))
    assert got.value.detail == "Key (id)=(1) already exists."
    assert got.value.row is None  # not a row of a bulk statement
    with pytest.raises(exc.ChangefeedError) as bad:
        conn.execute("INSERT INTO t (id, v) VALUES ($1, 'a')", ("not a number",))
    assert bad.value.row is None
    assert conn.execute("SELECT id, v FROM t").rows == [(1, "a")]


def test_ddl_between_runs_makes_a_new_plan(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    ins = "INSERT INTO t VALUES ($1, $2)"  # the first columns, in order: what they are moves
    conn.execute(ins, (1, "a"))
    # A column with a DEFAULT (existing rows take it too): the plan made before it would leave
    # a new row's NULL.
    conn.execute("ALTER TABLE t ADD COLUMN n INT DEFAULT 7")
    conn.execute(ins, (2, "b"))
    assert conn.execute("SELECT id, v, n FROM t ORDER BY id").rows == [(1, "a", 7), (2, "b", 7)]
    conn.execute("ALTER TABLE t DROP COLUMN n")
    conn.execute(ins, (3, "c"))
    # Dropped and made again under the same name: the plan of the old table must not write.
    conn.execute("DROP TABLE t")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING, w STRING DEFAULT 'new')")
    conn.execute(ins, (4, "d"))
    conn.execute("INSERT INTO t (id, v) VALUES ($1, $2)", (5, "e"))
    assert conn.execute("SELECT id, v, w FROM t ORDER BY id").rows == [(4, "d", "new"), (5, "e", "new")]


def test_revoke_reaches_a_kept_plan(tmp_path: Path) -> None:
    root = changefeed.connect(tmp_path / "db")
    root.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    root.execute("CREATE USER w")
    root.execute("GRANT INSERT, SELECT, UPDATE ON TABLE t TO w")
    w = changefeed.connect(tmp_path / "db", user="w")
    w.execute("UPSERT INTO t (id, v) VALUES ($1, 'a')", (1,))
    root.execute("REVOKE UPDATE ON TABLE t FROM w")
    with pytest.raises(exc.PermissionDenied):
        w.execute("UPSERT INTO t (id, v) VALUES ($1, 'a')", (2,))
    root.execute("GRANT UPDATE ON TABLE t TO w")
    w.execute("UPSERT INTO t (id, v) VALUES ($1, 'a')", (3,))
    assert root.execute("SELECT id FROM t ORDER BY id").rows == [(1,), (3,)]


def test_a_rolled_back_catalog_change_leaves_no_plan(tmp_path: Path) -> None:
    """A plan made inside a transaction that changed the catalog is not kept: the version it saw
    is taken back by the rollback, and the next change reuses that number."""
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    ins = "INSERT INTO t VALUES ($1, $2)"
    conn.execute("BEGIN")
    conn.execute("ALTER TABLE t ADD COLUMN n INT")
    conn.execute("INSERT INTO t VALUES ($1, $2, $3)", (1, "a", 1))
    conn.execute("SELECT count(*) FROM t")  # the transaction reads its own catalog again
    conn.execute("INSERT INTO t VALUES ($1, $2, $3)", (2, "b", 2))
    conn.execute("ROLLBACK")
    conn.execute("ALTER TABLE t ADD COLUMN m STRING")  # the same catalog version number, another table
    conn.execute("INSERT INTO t VALUES ($1, $2, $3)", (3, "c", "m"))  # m, not the rolled-back n
    conn.execute(ins, (4, "d"))
    assert conn.execute("SELECT id, v, m FROM t ORDER BY id").rows == [(3, "c", "m"), (4, "d", None)]


def test_use_changes_the_table_a_plan_writes(tmp_path: Path) -> None:
    cql = changefeed.connect(tmp_path / "db", dialect="cql")
    for ks in ("a", "b"):
        cql.execute(f"CREATE TABLE {ks}.t (pk int PRIMARY KEY, v text)")
    cql.execute("USE a")
    cql.execute("INSERT INTO t (pk, v) VALUES (?, ?)", (1, "in a"))
    cql.execute("USE b")
    cql.execute("INSERT INTO t (pk, v) VALUES (?, ?)", (1, "in b"))
    assert cql.execute("SELECT v FROM a.t").rows == [("in a",)]
    assert cql.execute("SELECT v FROM b.t").rows == [("in b",)]


def test_plans_write_what_the_long_way_writes(tmp_path: Path) -> None:
    """The same writes, compiled and the long way (a value the plan does not take: ``$1 + 0``),
    leave the same rows and the same CDC log, in transactions of their own and in one block."""
    logs = []
    for way, (key, value) in {"plan": ("?", "?"), "long": ("? + 0", "? || ''")}.items():
        cql = changefeed.connect(tmp_path / way, dialect="cql")
        cql.execute(
            "CREATE TABLE ks.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
        )
        for i in range(6):
            cql.execute(f"INSERT INTO ks.t (pk, ck, v) VALUES ({key}, ?, {value})", (i % 2, i, f"v{i}"))
        cql.execute(f"INSERT INTO ks.t (pk, ck, v) VALUES ({key}, ?, {value}) USING TTL 100", (0, 0, "ttl"))
        cql.execute("BEGIN BATCH INSERT INTO ks.t (pk, ck, v) VALUES (1, 9, 'b') APPLY BATCH")
        logs.append(
            (
                cql.execute("SELECT pk, ck, v FROM ks.t").rows,
                cql.execute(
                    'SELECT "cdc$batch_seq_no", "cdc$operation", "cdc$ttl", pk, ck, v FROM ks.t_scylla_cdc_log'
                ).rows,
            )
        )
        cql.close()
    assert logs[0] == logs[1]
    assert len(logs[0][1]) == 8


def test_plans_in_a_transaction_block(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
    conn.execute("BEGIN")
    for i in range(5):
        conn.execute("UPSERT INTO t (id, v) VALUES ($1, $2)", (i, "x"))
    conn.execute("SAVEPOINT s")
    conn.execute("UPSERT INTO t (id, v) VALUES ($1, $2)", (9, "y"))
    conn.execute("ROLLBACK TO SAVEPOINT s")
    with pytest.raises(exc.UniqueViolation):
        conn.execute("INSERT INTO t (id, v) VALUES ($1, $2)", (1, "z"))
    conn.execute("ROLLBACK")
    conn.execute("BEGIN")
    conn.execute("UPSERT INTO t (id, v) VALUES ($1, $2)", (1, "kept"))
    conn.execute("COMMIT")
    assert conn.execute("SELECT id, v FROM t").rows == [(1, "kept")]


def test_simple_protocol_texts_of_one_shape_share_a_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PostgreSQL endpoint runs a simple-protocol INSERT by its normalised template (the
    constants as parameters): one plan for every text of that shape. A text whose template the
    plan does not take (a constant inside an expression) runs as it parses."""
    monkeypatch.setenv(cluster.WORKERS_ENV, "1")  # the sessions in this process, to count plans
    changefeed.connect(tmp_path / "db").execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING, n DECIMAL)")
    server = start_server(tmp_path / "db")

    async def work() -> tuple[list[tuple[object, ...]], int]:
        conn = await asyncpg.connect(
            host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
        )
        try:
            for i in range(40):
                status = await conn.execute(f"UPSERT INTO t (id, v, n) VALUES ({i % 20}, 'v{i}', {i}.5)")
                assert status == "INSERT 0 1"
            await conn.execute("INSERT INTO t (id, v, n) VALUES (100 + 1, 'a' || 'b', -2)")
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute("INSERT INTO t (id, v, n) VALUES (3, 'dup', 0)")
            sessions = list(server.endpoint.server.registry.sessions.values())  # type: ignore[attr-defined]
            made = sum(s.conn.session.plans_made for s in sessions)
            rows = await conn.fetch("SELECT id, v, n FROM t ORDER BY id")
            return [tuple(r) for r in rows], made
        finally:
            await conn.close()

    try:
        rows, made = asyncio.run(work())
    finally:
        server.stop()
    # The UPSERT's first text (parsed: its template is made from it) and its template's, the
    # expression INSERT's (none: it runs as parsed) and the plain INSERT's: not one per text.
    assert made <= 4
    assert len(rows) == 21
    assert rows[3][:2] == (3, "v23") and str(rows[3][2]) == "23.5"
    assert rows[-1][:2] == (101, "ab") and str(rows[-1][2]) == "-2"


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_plans_answer_random_values_as_the_long_way_does(tmp_path: Path, seed: int) -> None:
    """Random single-row INSERTs, UPSERTs and INSERT .. ON CONFLICT DO NOTHING with values of
    every kind a client sends (right and wrong types, NULLs, out-of-range numbers, duplicates),
    through the plan and the long way (the statement's handler called directly), side by side:
    the same result or the same error for each, the same rows and the same change rows."""
    rnd = random.Random(seed)
    ddl = "CREATE TABLE t (id INT PRIMARY KEY, s STRING, d DECIMAL, b BOOL, f FLOAT, y BYTES, n INT2)"
    texts = [
        "INSERT INTO t (id, s, d, b, f, y, n) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        "UPSERT INTO t (id, s, d, b, f, y, n) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        "INSERT INTO t (id, s, d, b, f, y, n) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
        "UPSERT INTO t (id, s) VALUES ($1, $2)",
        "INSERT INTO t VALUES ($1, 'lit', 1.25, true, $5, NULL, $7)",
    ]
    kinds = {
        "id": lambda: rnd.choice([rnd.randint(0, 30), None, "7", "x", 2**63, -1, 1.0]),
        "s": lambda: rnd.choice(["a", "", "ünï", None, 5, "x" * 300]),
        "d": lambda: rnd.choice([decimal.Decimal("1.50"), "2.25", 3, None, "nan?", 1e300]),
        "b": lambda: rnd.choice([True, False, None, "true", 1, "maybe"]),
        "f": lambda: rnd.choice([0.5, -1e-9, None, 3, "1.5", "inf", "zz"]),
        "y": lambda: rnd.choice([b"\x00\xff", b"", None, "text", 7]),
        "n": lambda: rnd.choice([1, -32768, 32767, 32768, None, "12"]),
    }
    conns = {way: changefeed.connect(tmp_path / way) for way in ("plan", "long")}
    for c in conns.values():
        c.execute(ddl)
    for _ in range(300):
        text = rnd.choice(texts)
        (stmt,) = parse(text, "sql")
        params = [kinds[k]() for k in ("id", "s", "d", "b", "f", "y", "n")]
        outcomes = []
        for way, c in conns.items():
            session = c.session
            try:
                if way == "plan":
                    res = session.execute(stmt, params)
                else:
                    handler = session.statements.handler(stmt)
                    res = session.run(lambda t: handler.run(session, t, stmt, Params(params)), write=True)  # noqa: B023
                outcomes.append(("ok", res.status, res.rowcount))
            except exc.ChangefeedError as e:
                outcomes.append((type(e).__name__, str(e), e.code))
        assert outcomes[0] == outcomes[1], (text, params)
    tables = []
    for c in conns.values():
        tables.append(c.execute("SELECT * FROM t ORDER BY id").rows)
        schema = c.session.db.find_table("t")
        assert schema is not None
        changes = read_changes(c.session.db.conn, schema, 0, 1 << 62).to_pylist()
        tables.append([{k: v for k, v in ch.items() if k != "ts"} for ch in changes])  # all but the clock
        c.close()
    assert tables[0] == tables[2] and tables[1] == tables[3]
    assert len(tables[0]) > 5
