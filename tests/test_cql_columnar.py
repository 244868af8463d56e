"""The CQL endpoint's column-wise read of a CDC log (``select_log_columns`` + ``encode_rows``) is
byte for byte the row-wise result (``Session.execute`` + ``rows_encoder``): every CQL type, nulls,
deleted-column flags, static rows, pre- and post-images, TTLs, batches, all kinds of deletes, and
the windows ScyllaDB's CDC libraries read (streams, ``cdc$time`` bounds inclusive and exclusive)."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.clock import timeuuid_key
from changefeed.exceptions import PermissionDenied
from changefeed.server.cql import columnar
from changefeed.server.cql.columnar import encode_rows
from changefeed.server.cql.statements import result_types
from changefeed.server.cql.types import rows_encoder
from changefeed.sql.parser import parse
from changefeed.sql.statements import cdc_log, sqlite_columns
from changefeed.sql.statements.select import select_log_columns

TYPES: list[tuple[str, str]] = [
    ("a_ascii", "ascii"),
    ("a_bigint", "bigint"),
    ("a_blob", "blob"),
    ("a_boolean", "boolean"),
    ("a_date", "date"),
    ("a_decimal", "decimal"),
    ("a_double", "double"),
    ("a_duration", "duration"),
    ("a_float", "float"),
    ("a_inet", "inet"),
    ("a_int", "int"),
    ("a_smallint", "smallint"),
    ("a_text", "text"),
    ("a_time", "time"),
    ("a_timestamp", "timestamp"),
    ("a_timeuuid", "timeuuid"),
    ("a_tinyint", "tinyint"),
    ("a_uuid", "uuid"),
    ("a_varint", "varint"),
]


def _value(rng: random.Random, t: str) -> Any:
    if rng.random() < 0.15:
        return None
    match t:
        case "ascii":
            return rng.choice(["", "a", "abc" * rng.randint(1, 30)])
        case "text":
            return rng.choice(["", "zürich ✓", "x" * rng.randint(1, 300), "nul\x00byte"])
        case "bigint":
            return rng.choice([-(2**63), 2**63 - 1, rng.randint(-(2**40), 2**40)])
        case "int":
            return rng.choice([-(2**31), 2**31 - 1, rng.randint(-1000, 1000)])
        case "smallint":
            return rng.randint(-(2**15), 2**15 - 1)
        case "tinyint":
            return rng.randint(-128, 127)
        case "varint":
            return rng.choice([0, -1, 2**80, -(2**70), rng.randint(-(2**62), 2**62)])
        case "blob":
            return bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        case "boolean":
            return rng.random() < 0.5
        case "date":
            return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-20000, 40000))
        case "decimal":
            return Decimal(rng.choice(["-12.345", "0", "1e-20", "123456789012345678901234.5"]))
        case "double":
            return rng.choice([0.0, -1.5e300, 2.5, 1 / 3])
        case "float":
            return rng.choice([0.25, -2.0, 1.5])
        case "duration":
            return dt.timedelta(days=rng.randint(-5, 5), microseconds=rng.randint(0, 10**9))
        case "inet":
            return rng.choice(["10.1.2.3", "::1", "192.168.0.1"])
        case "time":
            return dt.time(rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), rng.randint(0, 999999))
        case "timestamp":
            return dt.datetime(2024, 5, 6, 7, 8, 9, rng.randint(0, 999) * 1000)
        case "timeuuid":
            return uuid.uuid1()
        case "uuid":
            return uuid.UUID(int=rng.getrandbits(128))
    raise AssertionError(t)


#: Types whose stored values SQLite's aggregates read (``sqlite_columns``): no REAL, no varint.
AGGREGATED = [(n, t) for n, t in TYPES if t not in ("float", "double", "varint")]


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> changefeed.Connection:
    """CDC tables (pre- and post-images, a static column) after a random workload: ``ks.w`` with
    every type (read from ``sqlite3``'s tuples), ``ks.n`` without floats and varints (read by
    SQLite's aggregates)."""
    conn = changefeed.connect(tmp_path_factory.mktemp("columnar") / "db", dialect="cql")
    _workload(conn, "ks.w", TYPES, random.Random(18))
    _workload(conn, "ks.n", AGGREGATED, random.Random(19))
    conn.execute("CREATE TABLE ks.empty (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    return conn


def _workload(
    conn: changefeed.Connection, table: str, types: list[tuple[str, str]], rng: random.Random
) -> None:
    cols = ", ".join(f"{n} {t}" for n, t in types)
    conn.execute(
        f"CREATE TABLE {table} (pk int, ck int, s text static, {cols}, PRIMARY KEY (pk, ck))"
        " WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    )
    names = [n for n, _ in types]
    insert = f"INSERT INTO {table} (pk, ck, {', '.join(names)}) VALUES (?, ?, {', '.join('?' * len(names))})"
    for i in range(400):
        pk, ck = rng.randrange(12), rng.randrange(8)
        what = rng.random()
        if what < 0.45:
            conn.execute(insert, [pk, ck, *(_value(rng, t) for _, t in types)])
        elif what < 0.55:
            conn.execute(f"{insert} USING TTL 1000", [pk, ck, *(_value(rng, t) for _, t in types)])
        elif what < 0.65:
            n, t = rng.choice(types)
            conn.execute(f"UPDATE {table} SET {n} = ? WHERE pk = ? AND ck = ?", [_value(rng, t), pk, ck])
        elif what < 0.7:
            n, _ = rng.choice(types)
            conn.execute(f"DELETE {n} FROM {table} WHERE pk = ? AND ck = ?", [pk, ck])
        elif what < 0.75:
            conn.execute(f"UPDATE {table} SET s = ? WHERE pk = ?", [f"static {i}", pk])
        elif what < 0.8:
            conn.execute(f"DELETE FROM {table} WHERE pk = ? AND ck = ?", [pk, ck])
        elif what < 0.83:
            conn.execute(f"DELETE FROM {table} WHERE pk = ? AND ck > ?", [pk, ck])
        elif what < 0.85:
            conn.execute(f"DELETE FROM {table} WHERE pk = ?", [pk])
        else:  # a batch over several partitions: one commit, one cdc$time per partition
            rows = [(rng.randrange(12), rng.randrange(8)) for _ in range(rng.randint(2, 20))]
            body = " ".join(
                f"INSERT INTO {table} (pk, ck, a_int, a_text) VALUES ({p}, {c}, {j}, 'b{j}');"
                for j, (p, c) in enumerate(rows)
            )
            conn.execute(
                f"BEGIN BATCH {body} UPDATE {table} SET s = 'batch' WHERE pk = {rows[0][0]}; APPLY BATCH"
            )


def _both(conn: changefeed.Connection, query: str, params: list[Any]) -> tuple[bytes, bytes, int]:
    session = conn.session
    stmt = parse(query, dialect="cql")[0]
    cols = select_log_columns(session, stmt, params)  # type: ignore[arg-type]
    assert cols is not None, query
    types = result_types(session, stmt, cols.names, cols.types, [])
    columnwise = encode_rows(cols.values, types, cols.rows).cells(0, cols.rows)
    res = session.execute(stmt, params)
    assert res.columns == cols.names
    assert result_types(session, stmt, res.columns, res.types, res.rows) == types
    return rows_encoder(types)(res.rows), columnwise, len(res.rows)


@pytest.mark.parametrize("table", ["ks.w", "ks.n"])
def test_the_whole_log_column_wise_is_the_row_wise_log(logged: changefeed.Connection, table: str) -> None:
    rowwise, columnwise, n = _both(logged, f"SELECT * FROM {table}_scylla_cdc_log", [])
    assert n > 500
    assert columnwise == rowwise
    for q in (
        f'SELECT "cdc$stream_id", "cdc$time", ck, a_text FROM {table}_scylla_cdc_log',
        f'SELECT a_int AS v, "cdc$deleted_a_int", "CDC$END_OF_BATCH" FROM {table}_scylla_cdc_log',
        "SELECT * FROM ks.empty_scylla_cdc_log",
    ):
        rowwise, columnwise, _ = _both(logged, q, [])
        assert columnwise == rowwise, q


def test_sqlites_aggregates_read_the_log_in_chunks(
    logged: changefeed.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ks.n`` is read by SQLite's aggregates, not from ``sqlite3``'s tuples, and in chunks."""

    def no_tuples(self: Any, window: Any) -> Any:
        raise AssertionError("read from tuples")

    monkeypatch.setattr(sqlite_columns, "CHUNK_ROWS", 97)
    rowwise, _, n = _both(logged, "SELECT * FROM ks.n_scylla_cdc_log", [])
    assert n > 97 * 3
    monkeypatch.setattr(cdc_log.LogView, "_fetch", no_tuples)
    session = logged.session
    stmt = parse("SELECT * FROM ks.n_scylla_cdc_log", dialect="cql")[0]
    cols = select_log_columns(session, stmt, [])  # type: ignore[arg-type]
    assert cols is not None
    types = result_types(session, stmt, cols.names, cols.types, [])
    assert encode_rows(cols.values, types, cols.rows).cells(0, cols.rows) == rowwise


def test_read_columns_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db")
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, i, s, b)")
    rows = [
        (1, 5, "a\x00b", b"\x00\xff"),
        (2, None, "", b""),
        (3, -(2**63), None, None),
        (4, 2**63 - 1, "zürich", b"z"),
    ]
    conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    classes = [pa.int64(), pa.string(), pa.binary()]
    got = sqlite_columns.read_columns(conn, "t", ["i", "s", "b"], classes, [], [], [True, True, True])
    assert got is not None
    assert [a.to_pylist() for a in got] == [list(c) for c in list(zip(*rows, strict=True))[1:]]
    assert sqlite_columns.read_columns(conn, "t", ["i"], [pa.int64()], ["seq > 5"], [], [True]) == [
        pa.array([], pa.int64())
    ]
    conn.execute("INSERT INTO t VALUES (5, 1.5, 'x', x'00')")  # a REAL: not read this way
    assert sqlite_columns.read_columns(conn, "t", ["i"], [pa.int64()], [], [], [True]) is None
    conn.execute("UPDATE t SET i = '1,2' WHERE seq = 5")  # text that is not one integer
    assert sqlite_columns.read_columns(conn, "t", ["i"], [pa.int64()], [], [], [True]) is None
    assert sqlite_columns.read_columns(conn, "t", ["i"], [pa.float64()], [], [], [True]) is None


@pytest.mark.parametrize("table", ["ks.w", "ks.n"])
def test_windows_column_wise_are_the_row_wise_windows(logged: changefeed.Connection, table: str) -> None:
    rng = random.Random(5)
    rows = logged.execute(f'SELECT "cdc$stream_id", "cdc$time" FROM {table}_scylla_cdc_log').rows
    streams = sorted({r[0] for r in rows})
    times = sorted({r[1] for r in rows}, key=timeuuid_key)
    for _ in range(40):
        picked = rng.sample(streams, rng.randint(1, 4))
        lo, hi = sorted(rng.sample(times, 2), key=timeuuid_key)
        lower, upper = rng.choice([">", ">="]), rng.choice(["<", "<="])
        marks = ", ".join("?" * len(picked))
        q = (
            f'SELECT * FROM {table}_scylla_cdc_log WHERE "cdc$stream_id" IN ({marks})'
            f' AND "cdc$time" {lower} ? AND "cdc$time" {upper} ?'
        )
        rowwise, columnwise, _ = _both(logged, q, [*picked, lo, hi])
        assert columnwise == rowwise, q
    one = times[len(times) // 2]
    rowwise, columnwise, n = _both(
        logged, f'SELECT * FROM {table}_scylla_cdc_log WHERE "cdc$time" = ?', [one]
    )
    assert n and columnwise == rowwise


def test_reads_the_row_wise_path_keeps(logged: changefeed.Connection) -> None:
    """What the log's window does not cover is left to the row-wise SELECT."""
    session = logged.session
    for q in (
        "SELECT * FROM ks.w_scylla_cdc_log WHERE pk = 1",
        "SELECT * FROM ks.w_scylla_cdc_log LIMIT 3",
        "SELECT count(*) FROM ks.w_scylla_cdc_log",
        'SELECT * FROM ks.w_scylla_cdc_log ORDER BY "cdc$time" DESC',
        "SELECT * FROM ks.w",
    ):
        assert select_log_columns(session, parse(q, dialect="cql")[0], []) is None, q  # type: ignore[arg-type]


def test_pages_are_slices_across_chunks(
    logged: changefeed.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(columnar, "CHUNK_ROWS", 7)
    session = logged.session
    stmt = parse("SELECT * FROM ks.w_scylla_cdc_log", dialect="cql")[0]
    cols = select_log_columns(session, stmt, [])  # type: ignore[arg-type]
    assert cols is not None
    types = result_types(session, stmt, cols.names, cols.types, [])
    encoded = encode_rows(cols.values, types, cols.rows)
    rows = session.execute(stmt, []).rows
    encode = rows_encoder(types)
    rng = random.Random(7)
    for _ in range(30):
        lo = rng.randrange(len(rows))
        hi = min(len(rows), lo + rng.randint(0, 40))
        assert encoded.cells(lo, hi) == encode(rows[lo:hi])
    assert encoded.cells(len(rows), len(rows) + 5) == b""


def test_a_privilege_is_checked_column_wise_too(tmp_path: Path) -> None:
    root = changefeed.connect(tmp_path / "db", dialect="cql")
    root.execute("CREATE TABLE ks.t (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    root.execute("INSERT INTO ks.t (pk, v) VALUES (1, 1)")
    admin = changefeed.connect(tmp_path / "db", dialect="sql")
    admin.execute("CREATE USER bob")
    admin.close()
    bob = changefeed.connect(tmp_path / "db", dialect="cql", user="bob")
    with pytest.raises(PermissionDenied):
        select_log_columns(bob.session, parse("SELECT * FROM ks.t_scylla_cdc_log", dialect="cql")[0], [])  # type: ignore[arg-type]
    bob.close()
    root.close()


def test_dates_before_the_epoch_encode() -> None:
    """CQL's date is days since 1970-01-01 plus 2**31, unsigned: 1969-12-31 is 0x7fffffff."""
    from changefeed.server.cql.types import decoder, encoder, simple

    enc, dec = encoder(simple("date")), decoder(simple("date"))
    for day, cell in (
        (dt.date(1969, 12, 31), b"\x00\x00\x00\x04\x7f\xff\xff\xff"),
        (dt.date(1970, 1, 1), b"\x00\x00\x00\x04\x80\x00\x00\x00"),
        (dt.date(1, 1, 1), None),
    ):
        got = enc(day)
        assert cell is None or got == cell
        assert dec(got[4:]) == day
