"""``format = parquet`` on the cloud-storage sink: CockroachDB's file names and metadata columns,
every column type, files read back by pyarrow, DuckDB and Spark; the option checks."""

from __future__ import annotations

import io
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import changefeed
from changefeed.engine.changes import read_changes
from changefeed.exceptions import InvalidOption
from changefeed.feeds.crdb_options import parse_crdb_options
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.formats.crdb_parquet import CrdbParquetEncoder, ParquetLayout, parquet_file

duckdb = pytest.importorskip("duckdb")

TABLE = (
    "CREATE TABLE e (id INT PRIMARY KEY, s STRING, i2 INT2, f FLOAT, f4 FLOAT4, d DECIMAL(10,2), dn DECIMAL,"
    " tz TIMESTAMPTZ, tn TIMESTAMP, dt DATE, tm TIME, iv INTERVAL, u UUID, bs BYTES, j JSONB, ai INT[], bo BOOL)"
)
ROW = (
    "INSERT INTO e (id, s, i2, f, f4, d, dn, tz, tn, dt, tm, iv, u, bs, j, ai, bo) VALUES (1, 'x', 7, 1.5, 0.5,"
    " 12.50, 0.0000001, '2019-01-02 03:04:05.123456+00', '2019-01-02 03:04:05.5', '2019-01-02', '03:04:05.123',"
    " '1 day 4 hours', '8c5b9c8e-0000-4000-8000-000000000001', 'ab', '{\"b\": 1, \"a\": [1]}', ARRAY[1, NULL, 3],"
    " true), (2, 'gone', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
)
ROW1 = {
    "id": 1,
    "s": "y",
    "i2": 7,
    "f": 1.5,
    "f4": 0.5,
    "d": Decimal("12.50"),
    "dn": "1E-7",
    "tz": "2019-01-02 03:04:05.123456+00:00",
    "tn": "2019-01-02 03:04:05.5",
    "dt": "2019-01-02",
    "iv": "1 day 04:00:00",
    "u": "8c5b9c8e-0000-4000-8000-000000000001",
    "bs": b"ab",
    "j": '{"a": [1], "b": 1}',
    "ai": [1, None, 3],
    "bo": True,
}


def _changes(tmp_path: Path) -> tuple[Any, Any]:
    c = changefeed.connect(tmp_path / "db")
    c.execute(TABLE)
    c.execute(ROW)
    c.execute("UPDATE e SET s = 'y' WHERE id = 1")
    c.execute("DELETE FROM e WHERE id = 2")
    c.db.refresh_catalog()
    t = c.db.find_table("e")
    batch = read_changes(c.db.conn, t, 0, 1 << 62)
    c.close()
    return t, batch


def _feed(t: Any, **raw: str | None) -> FeedSpec:
    opts = parse_crdb_options({"format": "parquet", **raw}, sink_scheme="nodelocal")
    return FeedSpec(
        id=1,
        table_id=t.id,
        name="x",
        kind="crdb",
        topic="e",
        partitions=1,
        format="crdb-parquet",
        mode=Mode.NEW_IMAGE,
        crdb=opts,
    )


def test_rows_types_and_metadata_columns(tmp_path: Path) -> None:
    t, batch = _changes(tmp_path)
    feed = _feed(t, updated=None, mvcc_timestamp=None, diff=None)
    recs = CrdbParquetEncoder().encode_python(batch, t, feed)
    assert [k for _, k, _, _ in recs] == [b"[1]", b"[2]", b"[1]", b"[2]"]
    body = parquet_file([v for _, _, v, _ in recs], ParquetLayout.of(t, feed), "zstd")
    table = pq.read_table(io.BytesIO(body))
    assert table.schema.names[-4:] == [
        "__crdb__event_type",
        "__crdb__updated",
        "__crdb__mvcc_timestamp",
        "__crdb__before",
    ]
    assert [str(table.schema.field(n).type) for n in ("id", "i2", "f4", "d", "tm", "ai")] == [
        "int64",
        "int32",
        "float",
        "decimal128(10, 2)",
        "int64",
        "list<element: int64>",
    ]
    rows = table.to_pylist()
    assert [r["__crdb__event_type"] for r in rows] == ["c", "c", "u", "d"]
    assert {k: rows[2][k] for k in ROW1} == ROW1
    assert rows[3]["s"] is None and rows[3]["id"] == 2  # a delete: its key, the rest NULL
    assert rows[3]["__crdb__before"] == (
        '{"ai": null, "bo": null, "bs": null, "d": null, "dn": null, "dt": null, "f": null, "f4": null, '
        '"i2": null, "id": 2, "iv": null, "j": null, "s": "gone", "tm": null, "tn": null, "tz": null, "u": null}'
    )
    assert rows[0]["__crdb__before"] is None and re.fullmatch(r"\d{19}\.\d{10}", rows[0]["__crdb__updated"])
    # DuckDB reads the same file
    path = tmp_path / "x.parquet"
    path.write_bytes(body)
    got = duckdb.sql(
        f"SELECT id, d, ai, __crdb__event_type FROM '{path}' ORDER BY __crdb__updated, id"
    ).fetchall()
    assert got == [
        (1, Decimal("12.50"), [1, None, 3], "c"),
        (2, None, None, "c"),
        (1, Decimal("12.50"), [1, None, 3], "u"),
        (2, None, None, "d"),
    ]


def test_parquet_options() -> None:
    with pytest.raises(InvalidOption, match="this sink is incompatible with format=parquet"):
        parse_crdb_options({"format": "parquet"}, sink_scheme="kafka")
    with pytest.raises(InvalidOption, match="this sink is incompatible with format=parquet"):
        parse_crdb_options({"format": "parquet"}, sink_scheme=None)
    with pytest.raises(InvalidOption, match="cannot specify both format=parquet and topic_in_value"):
        parse_crdb_options({"format": "parquet", "topic_in_value": None}, sink_scheme="nodelocal")


@pytest.mark.spark
def test_parquet_job_files_read_by_pyarrow_duckdb_and_spark(tmp_path: Path, spark: Any) -> None:
    from tests.test_crdb_jobs_spark import _run

    db = tmp_path / "db"
    c = changefeed.connect(db)
    c.execute(TABLE)
    c.execute(ROW)
    c.execute(
        "CREATE CHANGEFEED FOR e INTO 'nodelocal://1/pq' WITH format = parquet, updated, compression = gzip"
    )
    c.execute(
        "CREATE CHANGEFEED INTO 'nodelocal://1/q' WITH format = 'parquet' AS SELECT id, upper(s) AS big FROM e WHERE id = 1"
    )
    c.execute("UPDATE e SET s = 'y' WHERE id = 1")
    c.execute("DELETE FROM e WHERE id = 2")
    c.close()
    _run(db, spark)
    files = sorted((db / "extern" / "pq").rglob("*.parquet"))
    assert files and all(
        re.fullmatch(r"\d{33}-[0-9a-f]{16}-1-0-[0-9a-f]{8}-e-1\.parquet", f.name) for f in files
    ), files
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", files[0].parent.name)  # daily partition directory
    rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    assert sorted((r["id"], r["__crdb__event_type"], r["s"]) for r in rows) == [
        (1, "c", "x"),
        (1, "u", "y"),
        (2, "c", "gone"),
        (2, "d", None),
    ]
    assert {k: next(r for r in rows if r["__crdb__event_type"] == "u")[k] for k in ROW1} == ROW1
    pattern = str(db / "extern" / "pq" / "**" / "*.parquet")
    n = duckdb.sql(
        f"SELECT count(*), count(DISTINCT __crdb__updated) FROM read_parquet('{pattern}')"
    ).fetchall()[0]
    assert n == (4, 3)
    df = spark.read.parquet(*[str(f) for f in files])
    assert sorted(tuple(r) for r in df.select("id", "__crdb__event_type", "d").collect()) == [
        (1, "c", Decimal("12.50")),
        (1, "u", Decimal("12.50")),
        (2, "c", None),
        (2, "d", None),
    ]
    q = [r for f in sorted((db / "extern" / "q").rglob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    assert [(r["id"], r["big"], r["__crdb__event_type"]) for r in q] == [(1, "X", "c"), (1, "Y", "u")]
