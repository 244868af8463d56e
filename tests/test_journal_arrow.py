"""The journal source's and the scan's two read paths give the same Arrow batches: ADBC straight
into Arrow (typed by storage class) and Python's sqlite3 row tuples (``rows_to_batch``)."""

from __future__ import annotations

import math
from pathlib import Path

import adbc_driver_sqlite  # noqa: F401
import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import change_schema
from changefeed.feeds.spec import FeedSpec
from changefeed.feeds.store import all_feeds
from changefeed.pipeline.sources import journal as JS
from changefeed.pipeline.sources.journal import load_table
from changefeed.testing.workload import CQL_KEYSPACE

from .test_crdb_json import EVERY_ROWS, TYPES_TABLE


def _table_id(conn: changefeed.Connection, name: str) -> int:
    return int(conn.db.conn.execute("SELECT id FROM _catalog WHERE name = ?", (name,)).fetchone()[0])


def _python_batch(opts: JS._Options) -> pa.RecordBatch:
    conn = opts.connect()
    try:
        return JS.fast_batch(opts.table, conn.execute(JS._select_sql(opts.table), (0, 10**6)).fetchall())
    finally:
        conn.close()


def _every(conn: changefeed.Connection) -> None:
    """The table of every CockroachDB type, with its rows."""
    conn.execute("CREATE TYPE greeting AS ENUM ('hi', 'bye')")
    conn.execute(TYPES_TABLE)
    for row in EVERY_ROWS:
        cols = ", ".join(f'"{k}"' for k in row)
        # a FLOAT NaN is refused by the store (SQLite would keep NULL): an infinity stands in
        values = tuple(math.inf if isinstance(v, float) and math.isnan(v) else v for v in row.values())
        conn.execute(f"INSERT INTO every ({cols}) VALUES ({', '.join('?' for _ in row)})", values)


def test_every_type_reads_the_same(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        _every(conn)
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
        conn.execute(CQL_KEYSPACE.format(ks="ks"))
        conn.execute("CREATE TABLE ks.v (k varint PRIMARY KEY, n varint) WITH cdc = {'enabled': true}")
        tid = _table_id(conn, "ks.v")
    assert JS._ArrowReader.open(JS._Options({"path": str(db), "table_id": str(tid)})) is None


# ---------------------------------------------------------------------------------- the scan's reads
def _feed_at(conn: changefeed.Connection, table: str) -> tuple[FeedSpec, TableSchema]:
    """A feed created now on ``table`` (its snapshot point S) and the table's schema."""
    conn.execute(f"CREATE CHANGEFEED FOR {table} INTO 'topics://' WITH updated")
    row = all_feeds(conn.db.conn)[-1]
    return row.spec, load_table(conn.db.path, row.spec.table_id)


def _both_ways(db: Path, table: TableSchema, feed: FeedSpec, chunk_rows: int) -> tuple[list[pa.Table], int]:
    """Every chunk read through sqlite3 and through ADBC; asserts they are equal. Returns the
    chunks and how many of them the ADBC path left to sqlite3."""
    from changefeed.engine.database import DB_FILE, open_sqlite
    from changefeed.pipeline.snapshot.chunks import _read_chunk_arrow, compute_bounds, read_chunk_batches

    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:
        bounds, _ = compute_bounds(conn, table, chunk_rows)
    finally:
        conn.close()
    assert len(bounds) >= 2  # several chunks
    out = []
    fallbacks = 0
    for i in range(len(bounds) + 1):
        fallbacks += _read_chunk_arrow(str(db), table, feed, bounds, i, 3) is None
        slow = list(read_chunk_batches(str(db), table, feed, bounds, i, fetch_rows=3))
        fast = list(read_chunk_batches(str(db), table, feed, bounds, i, fetch_rows=3, arrow=True))
        assert all(b.num_rows <= 3 for b in fast)
        want = pa.Table.from_batches(slow, schema=change_schema(table))
        got = pa.Table.from_batches(fast, schema=change_schema(table))
        assert got.equals(want), i
        out.append(got)
    return out, fallbacks


def test_the_scan_reads_the_same_through_adbc(tmp_path: Path) -> None:
    """Every type, several chunks, rows changed, deleted and inserted after the snapshot."""
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        _every(conn)
        feed, table = _feed_at(conn, "every")
        conn.execute("UPDATE every SET s = 'z', f = 2.5, d = 3.25, bo = false WHERE id = 1")
        conn.execute("UPDATE every SET s = 'y' WHERE id = 1")
        conn.execute("DELETE FROM every WHERE id = 2")
        conn.execute("INSERT INTO every (id) VALUES (1000)")
    chunks, fallbacks = _both_ways(db, table, feed, chunk_rows=1)
    assert fallbacks == 0
    ids = sorted(i for t in chunks for i in t.column("c0").to_pylist())
    assert ids == sorted(int(r["id"]) for r in EVERY_ROWS)  # as of S: 1000 absent, 2 present


def test_the_scan_of_a_composite_key_reads_the_same(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (a INT, b STRING, v FLOAT, PRIMARY KEY (a, b))")
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i % 5, f"k{i}", i / 3) for i in range(40)])
        feed, table = _feed_at(conn, "t")
        conn.execute("UPDATE t SET v = -1 WHERE a = 2")
        conn.execute("DELETE FROM t WHERE a = 3 AND b = 'k3'")
    assert _both_ways(db, table, feed, chunk_rows=7)[1] == 0


def test_the_scan_falls_back_for_rows_with_ttls(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db, dialect="cql") as conn:
        conn.execute(CQL_KEYSPACE.format(ks="ks"))
        conn.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
        for k in range(12):
            conn.execute(
                f"INSERT INTO ks.t (k, v) VALUES ({k}, 'v{k}')" + (" USING TTL 3600" if k == 5 else "")
            )
        tid = _table_id(conn, "ks.t")
    with changefeed.connect(db) as conn:
        conn.execute("CREATE CHANGEFEED FOR TABLE \"ks.t\" INTO 'topics://'")
        feed = all_feeds(conn.db.conn)[-1].spec
    table = load_table(db, tid)
    assert feed.table_id == tid
    chunks, fallbacks = _both_ways(db, table, feed, chunk_rows=4)
    assert sum(t.num_rows for t in chunks) == 12
    assert fallbacks == 1  # the chunk holding the TTL'd row is read through sqlite3
