"""The column-wise bulk write path: multi-row INSERTs, and the journal rows they produce.

``Connection.executemany`` of an INSERT/UPSERT takes a compiled path that writes rows and journal
column by column (``engine.storage.insert_columns``). Whatever the path, the table and its
ScyllaDB log must be exactly what the same statements give one row at a time.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed import exceptions as exc
from changefeed.engine import txn
from changefeed.engine.storage import MAX_ROWS_PER_STATEMENT, TableStore, insert_columns
from tests.change_stream import change_rows

CDC_OPTIONS = [
    "{'enabled': true}",
    "{'enabled': true, 'preimage': true}",
    "{'enabled': true, 'preimage': 'full', 'postimage': true}",
    "{'enabled': true, 'postimage': true}",
    "{'enabled': true, 'delta': 'keys', 'preimage': true, 'postimage': true}",
]


# ---------------------------------------------------------------------- insert_columns
@pytest.mark.parametrize("n", [0, 1, 2, 63, 64, 65, 130, 1000])
def test_insert_columns_writes_every_row_once(n: int) -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, tx, k, a, b, gone)")
    rows = [(i, f"v{i}", None if i % 3 == 0 else i * 1.5) for i in range(n)]
    columns = {"k": [r[0] for r in rows], "a": [r[1] for r in rows], "b": [r[2] for r in rows]}
    insert_columns(conn, "t", {"tx": 7, "gone": None}, columns, n)
    got = conn.execute("SELECT tx, k, a, b, gone FROM t ORDER BY seq").fetchall()
    assert got == [(7, *r, None) for r in rows]


def test_insert_columns_twin_rows_reuse_the_values() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, op, bsn, k, d)")
    n = MAX_ROWS_PER_STATEMENT + 5
    insert_columns(
        conn,
        "t",
        {"op": 2, "bsn": 0},
        {"k": list(range(n)), "d": [1] * n},
        n,
        twin={"op": "9", "bsn": "{} + 1", "d": "NULL"},
    )
    got = conn.execute("SELECT op, bsn, k, d FROM t ORDER BY seq").fetchall()
    expected = []
    for k in range(n):
        expected += [(2, 0, k, 1), (9, 1, k, None)]
    assert got == expected


def test_insert_columns_stays_under_the_parameter_limit() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    names = [f"c{i}" for i in range(40)]
    conn.execute(f"CREATE TABLE t ({', '.join(names)})")
    n = 100  # 40 columns x 64 rows would need 2,560 parameters
    insert_columns(conn, "t", {}, {c: list(range(n)) for c in names}, n)
    assert conn.execute("SELECT count(*), sum(c0), sum(c39) FROM t").fetchone() == (n, 4950, 4950)


def test_insert_columns_refuses_ragged_columns() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (a, b)")
    with pytest.raises(ValueError):
        insert_columns(conn, "t", {}, {"a": [1, 2], "b": [1]}, 2)


# ---------------------------------------------------------------------- bulk == row by row
def _log_and_table(conn: changefeed.Connection, table: str) -> tuple[list[Any], list[Any]]:
    log = conn.execute(f"SELECT * FROM {table}_scylla_cdc_log").rows
    rows = conn.execute(f"SELECT * FROM {table}").rows
    # cdc$time (column 1) differs between the two databases; everything else must not.
    return [r[:1] + r[2:] for r in log], rows


def _both_ways(
    tmp_path: Path, dialect: str, setup: list[str], stmt: str, params: list[tuple[Any, ...]]
) -> tuple[tuple[list[Any], list[Any]], tuple[list[Any], list[Any]]]:
    out = []
    for how in ("bulk", "single"):
        conn = changefeed.connect(tmp_path / how, dialect=dialect)
        for s in setup:
            conn.execute(s)
        with conn.transaction():
            if how == "bulk":
                conn.executemany(stmt, params)
            else:
                for p in params:
                    conn.execute(stmt, p)
        out.append(_log_and_table(conn, "ks.t"))
        conn.close()
    return out[0], out[1]


@pytest.mark.parametrize("cdc", CDC_OPTIONS)
def test_cql_bulk_insert_matches_row_by_row(tmp_path: Path, cdc: str) -> None:
    rng = random.Random(cdc)
    setup = [
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        f"CREATE TABLE ks.t (p int, c int, a text, b bigint, PRIMARY KEY (p, c)) WITH cdc = {cdc}",
        # Existing rows, some of them rewritten below: pre-images and merged post-images.
        "INSERT INTO ks.t (p, c, a, b) VALUES (1, 1, 'old', 10)",
        "INSERT INTO ks.t (p, c, a) VALUES (2, 5, 'old-a-only')",
        "UPDATE ks.t SET b = 7 WHERE p = 3 AND c = 0",  # no row marker
        "BEGIN UNLOGGED BATCH INSERT INTO ks.t (p, c, a) VALUES (4, 0, 'x'); APPLY BATCH",
    ]
    # Several clustering rows per partition (batch_seq_no runs on within a partition), nulls.
    params = [
        (p, c, rng.choice([None, f"s{p}.{c}"]), rng.choice([None, p * 100 + c]))
        for p in range(1, 9)
        for c in range(rng.randint(1, 4))
    ]
    rng.shuffle(params)
    params = list({(p[0], p[1]): p for p in params}.values())
    bulk, single = _both_ways(
        tmp_path, "cql", setup, "INSERT INTO ks.t (p, c, a, b) VALUES (?, ?, ?, ?)", params
    )
    assert bulk == single
    assert any(r[3] == 0 for r in bulk[0]) == ("preimage" in cdc)  # cdc$operation 0 present


@pytest.mark.parametrize("cdc", CDC_OPTIONS)
def test_sql_bulk_upsert_matches_row_by_row(tmp_path: Path, cdc: str) -> None:
    setup = [
        "CREATE TABLE `ks.t` (k Int64, a Utf8, b Int64, c Double, PRIMARY KEY (k))",
        "UPSERT INTO `ks.t` (k, a, b, c) VALUES (3, 'three', 3, 3.0), (5, NULL, 5, NULL)",
    ]
    params = [(k, None if k % 4 == 0 else f"v{k}", k * 7, None if k % 5 == 0 else k / 3) for k in range(20)]
    out = []
    for how in ("bulk", "single"):
        conn = changefeed.connect(tmp_path / how)
        for s in setup:
            conn.execute(s)
        with changefeed.connect(tmp_path / how, dialect="cql") as cql:
            cql.execute(f"ALTER TABLE ks.t WITH cdc = {cdc}")
        with conn.transaction():
            stmt = "UPSERT INTO `ks.t` (k, a, b) VALUES (?, ?, ?)"  # c is kept
            if how == "bulk":
                conn.executemany(stmt, [p[:3] for p in params])
            else:
                for p in params:
                    conn.execute(stmt, p[:3])
        with changefeed.connect(tmp_path / how, dialect="cql") as cql:
            out.append(_log_and_table(cql, "ks.t"))
        conn.close()
    assert out[0] == out[1]


def test_sql_table_log_orders_by_token_like_cql(tmp_path: Path) -> None:
    """SQL tables store no token in the journal; the log view computes it from the key."""
    cql = changefeed.connect(tmp_path / "db", dialect="cql")
    sql = changefeed.connect(tmp_path / "db")
    cql.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    cql.execute("CREATE TABLE ks.c (k bigint PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
    sql.execute("CREATE TABLE `ks.s` (k Int64, v Utf8, PRIMARY KEY (k))")
    cql.execute("ALTER TABLE ks.s WITH cdc = {'enabled': true}")
    keys = list(range(40))
    cql.executemany("INSERT INTO ks.c (k, v) VALUES (?, ?)", [(k, str(k)) for k in keys])
    sql.executemany("UPSERT INTO `ks.s` (k, v) VALUES (?, ?)", [(k, str(k)) for k in keys])
    sql.execute("DELETE FROM `ks.s` WHERE k = 7")
    cql.execute("DELETE FROM ks.c WHERE k = 7")
    cols = '"cdc$stream_id", "cdc$batch_seq_no", "cdc$operation", k, v'
    from_cql = cql.execute(f"SELECT {cols} FROM ks.c_scylla_cdc_log").rows
    from_sql = cql.execute(f"SELECT {cols} FROM ks.s_scylla_cdc_log").rows
    assert from_sql == from_cql
    assert sorted(r[3] for r in from_sql if r[2] == 2) == keys  # SQL UPSERT logs as an insert too


# ---------------------------------------------------------------------- format version
def test_a_database_of_another_format_version_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (k Int64, PRIMARY KEY (k))")
    raw = sqlite3.connect(db / "changefeed.db")
    raw.execute("UPDATE _meta SET value = 1 WHERE key = 'version'")
    raw.commit()
    raw.close()
    with pytest.raises(exc.DatabaseError, match="format version 1"):
        changefeed.connect(db)
    raw = sqlite3.connect(db / "changefeed.db")
    assert raw.execute("SELECT value FROM _meta WHERE key = 'version'").fetchone() == (1,)
    raw.close()


# ---------------------------------------------------------------------- change stream
@pytest.mark.parametrize("existing", [False, True])
def test_bulk_change_rows_match_row_by_row(tmp_path: Path, existing: bool) -> None:
    """A bulk UPSERT's change rows are built from the written cells; row by row, the same
    transaction's rows come from reading the table back at commit. They must agree."""
    params = [(k, None if k % 4 == 0 else f"v{k}", k * 7) for k in range(30)]
    for how in ("bulk", "single"):
        conn = changefeed.connect(tmp_path / how)
        conn.execute("CREATE TABLE t (k Int64, a Utf8, b Int64, c Double, PRIMARY KEY (k))")
        if existing:
            conn.execute("UPSERT INTO t (k, a, b, c) VALUES (3, 'three', 3, 3.5), (5, NULL, 5, NULL)")
        conn.execute("ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')")
        with conn.transaction():
            if how == "bulk":
                conn.executemany("UPSERT INTO t (k, a, b) VALUES (?, ?, ?)", params)
            else:
                for p in params:
                    conn.execute("UPSERT INTO t (k, a, b) VALUES (?, ?, ?)", p)
        conn.close()
    bulk, single = change_rows(tmp_path / "bulk", "t"), change_rows(tmp_path / "single", "t")
    assert len(bulk) == len(params)
    assert bulk == single


@pytest.mark.parametrize("cdc", CDC_OPTIONS)
@pytest.mark.parametrize("verb", ["update", "delete"])
def test_sql_bulk_update_and_delete_match_row_by_row(tmp_path: Path, cdc: str, verb: str) -> None:
    """One UPDATE/DELETE over many rows is written in bulk; the same change key by key, in one
    transaction, takes the per-key paths. Table, ScyllaDB log and change stream must agree."""
    stmt = {
        "update": (
            "UPDATE `ks.t` SET b = b * 2, a = NULL WHERE k < 12",
            "UPDATE `ks.t` SET b = b * 2, a = NULL WHERE k = ?",
        ),
        "delete": ("DELETE FROM `ks.t` WHERE k < 12", "DELETE FROM `ks.t` WHERE k = ?"),
    }[verb]
    out = []
    for how in ("bulk", "single"):
        db = tmp_path / how
        conn = changefeed.connect(db)
        conn.execute("CREATE TABLE `ks.t` (k Int64, a Utf8, b Int64, c Double, PRIMARY KEY (k))")
        conn.executemany(
            "UPSERT INTO `ks.t` (k, a, b, c) VALUES (?, ?, ?, ?)",
            [(k, f"v{k}", k, None if k % 3 else k / 2) for k in range(20)],
        )
        with changefeed.connect(db, dialect="cql") as cql:
            cql.execute(f"ALTER TABLE ks.t WITH cdc = {cdc}")
        conn.execute(
            "ALTER TABLE `ks.t` ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')"
        )
        with conn.transaction():
            if how == "bulk":
                assert conn.execute(stmt[0]).rowcount == 12
            else:
                for k in range(12):
                    conn.execute(stmt[1], (k,))
        conn.close()
        with changefeed.connect(db, dialect="cql") as cql:
            out.append((_log_and_table(cql, "ks.t"), change_rows(db, "ks.t")))
    assert out[0] == out[1]
    (log, table), changes = out[0]
    assert len(log) >= 12 and len(changes) == 12 and len(table) == (20 if verb == "update" else 8)


def test_bulk_insert_errors_are_those_of_the_first_bad_row(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (k Int64, a Utf8, b Int64, PRIMARY KEY (k))")
    rows = [(1, "x", 1), (None, "y", 2), (3, "z", "bad")]
    with pytest.raises(exc.InvalidStatement, match="missing value for primary key column k"):
        conn.executemany("UPSERT INTO t (k, a, b) VALUES (?, ?, ?)", rows)
    with pytest.raises(exc.TypeMismatch):
        conn.executemany(
            "UPSERT INTO t (k, a, b) VALUES (?, ?, ?)", [(1, "x", 1), (2, "y", "bad"), (None, "z", 3)]
        )
    assert conn.execute("SELECT count(*) FROM t").rows == [(0,)]
    # No rows: nothing is converted, so nothing can fail.
    assert conn.executemany("UPSERT INTO t (k, a) VALUES (?, 5)", []).rowcount == 0


def test_cql_in_list_repeats_name_a_row_once(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db", dialect="cql")
    conn.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    conn.execute("CREATE TABLE ks.t (p int, c int, v int, PRIMARY KEY (p, c)) WITH cdc = {'enabled': true}")
    conn.execute("UPDATE ks.t SET v = 1 WHERE p IN (1, 1, 2) AND c IN (5, 5)")
    log = conn.execute('SELECT p, c, "cdc$operation" FROM ks.t_scylla_cdc_log').rows
    assert sorted(log) == [(1, 5, 1), (2, 5, 1)]


# ---------------------------------------------------------------------- randomized
def _random_cql_transaction(rng: random.Random) -> tuple[list[tuple[str, Any]], list[tuple[str, str, Any]]]:
    """A random CQL table (clustering key or not, static column or not, any cdc option, maybe a
    changefeed), rows written before, and a transaction mixing bulk INSERTs (column subsets,
    TTL, nulls, repeated keys) with updates, deletes and static writes of the same keys."""
    ck, static = rng.random() < 0.7, rng.random() < 0.5
    cols = (
        "p int, "
        + ("c int, " if ck else "")
        + ("s text static, " if ck and static else "")
        + "a text, b bigint"
    )
    kw, kq, kwhere = ("p, c", "?, ?", "p = ? AND c = ?") if ck else ("p", "?", "p = ?")
    setup: list[tuple[str, Any]] = [
        ("cql", "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"),
        ("cql", f"CREATE TABLE ks.t ({cols}, PRIMARY KEY ({kw})) WITH cdc = {rng.choice(CDC_OPTIONS)}"),
    ]
    if rng.random() < 0.6:
        setup.append(
            ("sql", "ALTER TABLE `ks.t` ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')")
        )

    def key() -> tuple[int, ...]:
        return (rng.randrange(5), rng.randrange(3)) if ck else (rng.randrange(5),)

    def val() -> tuple[str | None, int | None]:
        return rng.choice([None, f"x{rng.randrange(100)}"]), rng.choice([None, rng.randrange(1000)])

    for _ in range(rng.randrange(8)):
        k, (a, b) = key(), val()
        setup.append(("cql", (f"INSERT INTO ks.t ({kw}, a, b) VALUES ({kq}, ?, ?)", (*k, a, b))))
    steps: list[tuple[str, str, Any]] = []
    for _ in range(rng.randrange(1, 6)):
        r = rng.random()
        if r < 0.5:
            keys = list({key() for _ in range(rng.randrange(1, 12))})
            written = rng.choice([("a", "b"), ("a",), ("b",), ()])
            ttl = " USING TTL 1000" if rng.random() < 0.3 else ""
            names = ", ".join((kw, *written))
            marks = ", ".join([kq] + ["?"] * len(written))
            params = [(*k, *(dict(zip("ab", val(), strict=True))[c] for c in written)) for k in keys]
            steps.append(("many", f"INSERT INTO ks.t ({names}) VALUES ({marks}){ttl}", params))
        elif r < 0.65:
            steps.append(("one", f"UPDATE ks.t USING TTL 500 SET a = ? WHERE {kwhere}", (val()[0], *key())))
        elif r < 0.75:
            steps.append(("one", f"DELETE FROM ks.t WHERE {kwhere}", key()))
        elif r < 0.85:
            steps.append(("one", f"DELETE b FROM ks.t WHERE {kwhere}", key()))
        elif ck and static:
            steps.append(
                ("one", "UPDATE ks.t SET s = ? WHERE p = ?", (rng.choice([None, "st"]), rng.randrange(5)))
            )
        elif ck:
            steps.append(("one", "DELETE FROM ks.t WHERE p = ?", (rng.randrange(5),)))
    return setup, steps


@pytest.mark.parametrize("seed", range(40))
def test_random_cql_transactions_bulk_equals_row_by_row(tmp_path: Path, seed: int) -> None:
    setup, steps = _random_cql_transaction(random.Random(seed))
    out = []
    for how in ("bulk", "single"):
        db = tmp_path / how
        conns = {"sql": changefeed.connect(db), "cql": changefeed.connect(db, dialect="cql")}
        for dialect, stmt in setup:
            sql, params = (stmt, ()) if isinstance(stmt, str) else stmt
            conns[dialect].execute(sql, params)
        cql = conns["cql"]
        with cql.transaction():
            for kind, sql, params in steps:
                if kind == "many" and how == "bulk":
                    cql.executemany(sql, params)
                elif kind == "many":
                    for p in params:
                        cql.execute(sql, p)
                else:
                    cql.execute(sql, params)
        out.append(_log_and_table(cql, "ks.t"))
        for c in conns.values():
            c.close()
        out.append(change_rows(db, "ks.t") if len(setup) > 2 and setup[2][0] == "sql" else [])
    assert out[0] == out[2] and out[1] == out[3]


@pytest.mark.parametrize("overlap", [False, True])
def test_chunked_bulk_writes_match_one_statement(
    tmp_path: Path, overlap: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bulk write sent in chunks (the PostgreSQL endpoint's pipelined batches run 256 rows at
    a time) writes each chunk's change rows at once while the chunks' keys are disjoint; a chunk
    that rewrites a key turns them back into per-key changes. Either way the change rows, their
    ``seq`` numbers and the table equal those of the Python capture, row by row."""
    params = [(k, None if k % 4 == 0 else f"v{k}", k * 7) for k in range(40)]
    chunks = [params[:10], params[10:25], params[25:]]
    if overlap:
        chunks.append([(k, f"again{k}", -k) for k in (3, 12, 30)])

    def run(path: Path, how: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[Any]]:
        conn = changefeed.connect(path)
        conn.execute("CREATE TABLE t (k Int64, a Utf8, b Int64, PRIMARY KEY (k))")
        conn.execute("UPSERT INTO t (k, a, b) VALUES (3, 'three', 3), (27, NULL, 5)")
        conn.execute("ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')")
        with conn.transaction():
            for chunk in chunks:
                if how == "single":
                    for p in chunk:
                        conn.execute("UPSERT INTO t (k, a, b) VALUES (?, ?, ?)", p)
                else:
                    conn.executemany("UPSERT INTO t (k, a, b) VALUES (?, ?, ?)", chunk)
        rows = conn.execute("SELECT k, a, b FROM t ORDER BY k").rows
        conn.close()
        raw = sqlite3.connect(path / "changefeed.db")
        seqs = raw.execute("SELECT seq FROM sqlite_sequence ORDER BY name").fetchall()
        raw.close()
        return change_rows(path, "t"), seqs, rows

    calls: list[int] = []
    capture = TableStore.capture_bulk_write

    def counted(self: TableStore, *args: Any) -> int:
        calls.append(len(args[2]))
        return capture(self, *args)

    monkeypatch.setattr(TableStore, "capture_bulk_write", counted)
    fast = run(tmp_path / "fast", "bulk")
    assert calls[-3:] == [10, 15, 15]  # every chunk of fresh keys went at once
    single = run(tmp_path / "single", "single")
    monkeypatch.setattr(txn, "CAPTURE_IN_SQLITE", False)
    slow = run(tmp_path / "slow", "bulk")
    assert fast == slow == single
    assert len(fast[0]) == 40  # one change per key and transaction


# ---------------------------------------------------------------------- multi-row parameters
def _values(rows: int, width: int) -> str:
    return ", ".join(
        "(" + ", ".join(f"${r * width + j + 1}" for j in range(width)) + ")" for r in range(rows)
    )


@pytest.mark.parametrize("cdc", CDC_OPTIONS[1:3])
@pytest.mark.parametrize("verb", ["INSERT", "UPSERT", "INSERT_NOTHING"])
def test_multi_row_parameter_insert_matches_row_by_row(tmp_path: Path, cdc: str, verb: str) -> None:
    """``INSERT .. VALUES ($1, $2, $3), ($4, $5, $6), ..`` (pgjdbc's reWriteBatchedInserts) is
    written as executemany's bulk write: table, ScyllaDB log and change stream as one row at a
    time."""
    rows = [
        (k, None if k % 4 == 0 else f"v{k}", k * 7) for k in range(40) if verb != "INSERT" or k not in (3, 5)
    ]
    head = {"INSERT": "INSERT", "UPSERT": "UPSERT", "INSERT_NOTHING": "INSERT"}[verb]
    tail = " ON CONFLICT DO NOTHING" if verb == "INSERT_NOTHING" else ""
    out = []
    for how in ("bulk", "single"):
        db = tmp_path / how
        conn = changefeed.connect(db)
        conn.execute("CREATE TABLE `ks.t` (k Int64, a Utf8, b Int64, c Double, PRIMARY KEY (k))")
        conn.execute("UPSERT INTO `ks.t` (k, a, b, c) VALUES (3, 'three', 3, 3.5), (5, NULL, 5, NULL)")
        with changefeed.connect(db, dialect="cql") as cql:
            cql.execute(f"ALTER TABLE ks.t WITH cdc = {cdc}")
        conn.execute(
            "ALTER TABLE `ks.t` ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')"
        )
        if how == "bulk":
            flat = [v for r in rows for v in r]
            res = conn.execute(f"{head} INTO `ks.t` (k, a, b) VALUES {_values(len(rows), 3)}{tail}", flat)
            written = res.rowcount
        else:
            written = 0
            with conn.transaction():
                for r in rows:
                    written += conn.execute(
                        f"{head} INTO `ks.t` (k, a, b) VALUES ($1, $2, $3){tail}", r
                    ).rowcount
        conn.close()
        with changefeed.connect(db, dialect="cql") as cql:
            out.append((written, _log_and_table(cql, "ks.t"), change_rows(db, "ks.t")))
    assert out[0] == out[1]
    assert out[0][0] == (38 if verb != "UPSERT" else 40)


@pytest.mark.parametrize(
    "bad",
    [
        [(10, "x", 1), (3, "dup", 2)],  # a key that is there already
        [(10, "x", 1), (11, "y", 2), (10, "again", 3)],  # a key twice in the statement
        [(10, "x", 1), (11, "y", "seven")],  # not an integer
        [(10, "x", 1), (None, "y", 2)],  # no key
        [(10, "x", 1), (11, "y", 2**70)],  # out of range
    ],
)
def test_multi_row_parameter_insert_fails_as_its_first_bad_row(
    tmp_path: Path, bad: list[tuple[Any, ...]]
) -> None:
    """The error of a multi-row parameter INSERT is the one its first bad row gets on its own,
    and the statement writes nothing."""
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, a TEXT, b INT)")
    conn.execute("INSERT INTO t VALUES (3, 'three', 3)")
    with pytest.raises(exc.ChangefeedError) as first, conn.transaction():
        for r in bad:
            conn.execute("INSERT INTO t (k, a, b) VALUES ($1, $2, $3)", r)
    flat = [v for r in bad for v in r]
    with pytest.raises(exc.ChangefeedError) as multi:
        conn.execute(f"INSERT INTO t (k, a, b) VALUES {_values(len(bad), 3)}", flat)
    assert (type(multi.value), str(multi.value)) == (type(first.value), str(first.value))
    assert multi.value.row is None  # a row of the statement, not of an executemany around it
    with pytest.raises(exc.InvalidStatement, match=r"bind parameter 6 has no value \(5 given\)"):
        conn.execute(f"INSERT INTO t (k, a, b) VALUES {_values(2, 3)}", [10, "x", 1, 11, "y"])
    assert conn.execute("SELECT k FROM t").rows == [(3,)]


def test_multi_row_insert_do_nothing_counts_rows_written_with_a_key_twice(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, a TEXT)")
    res = conn.execute(
        f"INSERT INTO t (k, a) VALUES {_values(3, 2)} ON CONFLICT DO NOTHING", [1, "x", 1, "y", 2, "z"]
    )
    assert (res.status, res.rowcount) == ("INSERT 2", 2)
    assert conn.execute("SELECT k, a FROM t ORDER BY k").rows == [(1, "x"), (2, "z")]


def test_multi_row_parameter_insert_with_a_row_of_another_width_is_refused(tmp_path: Path) -> None:
    """Rows of 2, 3 and 1 values hold 6 parameters, as three rows of 2 would: still an error."""
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, a TEXT)")
    with pytest.raises(exc.InvalidStatement, match="VALUES lists must all be the same length") as err:
        conn.execute("INSERT INTO t (k, a) VALUES ($1, $2), ($3, $4, $5), ($6)", [1, "a", 2, "b", 3, 4])
    assert err.value.code == "42601"
    assert conn.execute("SELECT count(*) FROM t").rows == [(0,)]
