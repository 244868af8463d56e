"""The journal source's two read paths give the same Arrow batches: ADBC straight into Arrow
(typed by storage class) and Python's sqlite3 row tuples (``rows_to_batch``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import changefeed
from changefeed.pipeline import journal_source as JS

from .test_crdb_json import EVERY_ROWS, TYPES_TABLE

pytest.importorskip("adbc_driver_sqlite")


def _table_id(conn: changefeed.Connection, name: str) -> int:
    return int(conn.db.conn.execute("SELECT id FROM _catalog WHERE name = ?", (name,)).fetchone()[0])


def _python_batch(opts: JS._Options) -> pa.RecordBatch:
    conn = opts.connect()
    try:
        return JS.fast_batch(opts.table, conn.execute(JS._select_sql(opts.table), (0, 10**6)).fetchall())
    finally:
        conn.close()


def test_every_type_reads_the_same(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TYPE greeting AS ENUM ('hi', 'bye')")
        conn.execute(TYPES_TABLE)
        for row in EVERY_ROWS:
            cols = ", ".join(f'"{k}"' for k in row)
            conn.execute(
                f"INSERT INTO every ({cols}) VALUES ({', '.join('?' for _ in row)})", tuple(row.values())
            )
        conn.execute("UPDATE every SET s = 'z', f = 2.5, d = 3.25, bo = false WHERE id = 1")
        conn.execute("DELETE FROM every WHERE id = 2")
        tid = _table_id(conn, "every")
    opts = JS._Options({"path": str(db), "table_id": str(tid)})
    reader = JS._ArrowReader.open(opts)
    assert reader is not None
    try:
        fast = reader.read(0, 10**6)
    finally:
        reader.close()
    assert fast is not None
    slow = _python_batch(opts)
    assert fast.schema == slow.schema
    assert fast.num_rows == slow.num_rows == len(EVERY_ROWS) + 2
    for name in slow.schema.names:
        assert fast.column(name).equals(slow.column(name)), name
    # and through read_range, in CHUNK-sized pieces
    assert pa.Table.from_batches(list(JS.read_range(opts, 0, 10**3))).equals(pa.Table.from_batches([slow]))


def test_a_failed_arrow_read_falls_back_to_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT) WITH (CHANGES = TRUE)")
        conn.execute("INSERT INTO t VALUES (1, 1), (2, NULL)")
        tid = _table_id(conn, "t")
    opts = JS._Options({"path": str(db), "table_id": str(tid)})
    reader = JS._ArrowReader.open(opts)
    assert reader is not None
    reader.sql = "SELECT no_such_column FROM sqlite_master WHERE ? < ?"  # what the driver refuses
    assert reader.read(0, 10**6) is None
    monkeypatch.setattr(JS._ArrowReader, "open", classmethod(lambda cls, o: reader))
    got = pa.Table.from_batches(list(JS.read_range(opts, 0, 10**3)))
    assert got.column("c1").to_pylist() == [1, None]
    assert got.equals(pa.Table.from_batches([_python_batch(opts)]))


def test_varint_columns_read_through_python(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db, dialect="cql") as conn:
        conn.execute(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        conn.execute("CREATE TABLE ks.v (k varint PRIMARY KEY, n varint) WITH cdc = {'enabled': true}")
        tid = _table_id(conn, "ks.v")
    assert JS._ArrowReader.open(JS._Options({"path": str(db), "table_id": str(tid)})) is None
