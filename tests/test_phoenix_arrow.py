"""The column-wise Arrow encoding of Phoenix CDC events (``formats/phoenix_arrow.py``) and the
Spark source's ADBC read (``phoenix_source._arrow_batches``): byte for byte the ``sqlite3`` path's
text, on every Phoenix type, every shape of event, TTL deletes, every INCLUDE set, and across a
fallback to ``sqlite3`` in the middle of a partition. No Spark session: the readers run here."""

from __future__ import annotations

import itertools
import math
import random
import sqlite3
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.gc import collect_garbage
from changefeed.formats.phoenix_arrow import double_array, double_texts
from changefeed.formats.phoenix_json import SCOPES, EventEncoder, java_double
from changefeed.pipeline.sources import phoenix as ps
from tests.phoenix_clock import MS, Clock


def _doubles(rng: random.Random) -> list[float]:
    out = [0.0, -0.0, 1e-3, -1e-3, 1e7, -1e7, 9999999.999999998, math.nextafter(1e-3, 0), 1.0, 100.0]
    out += [math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308, 1e21, 1e-7]
    for _ in range(60_000):
        bits = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        out += [
            bits,
            rng.uniform(-1e7, 1e7),
            rng.randint(-(10**7), 10**7) / rng.choice([1, 2, 3, 7, 1024, 1000]),
        ]
        out.append(rng.randint(1, 1 << 20) / (1 << rng.randint(0, 40)))
    return out


def test_arrow_doubles_are_java_doubles(tmp_path: Path) -> None:
    """Arrow's shortest-digits cast, with ``.0`` on integral values, is ``Double.toString`` in the
    plain range; every other value (NaN, infinities, exponents) takes the scalar path."""
    xs = _doubles(random.Random(3))
    want = [java_double(x) for x in xs]
    assert double_texts(np.array(xs, dtype=np.float64), java_double) == want
    assert double_array(pa.array(xs, type=pa.float64()), java_double).to_pylist() == want
    assert double_array(pa.array([None, 2.5], type=pa.float64()), java_double).to_pylist() == ["null", "2.5"]
    c = changefeed.connect(tmp_path / "db")
    c.execute("CREATE TABLE D (k INTEGER PRIMARY KEY, v DOUBLE) COLUMN_ENCODED_BYTES=0")
    c.execute("SELECT * FROM D")
    t = c.db.find_table("D")
    assert t is not None
    doubles = EventEncoder(t, frozenset()).render_column[0]
    assert doubles(xs) == want  # the batch encoder's DOUBLE column: Arrow
    assert doubles([None, *xs[:200]]) == ["null", *want[:200]]  # with a NULL: value by value
    c.close()


TYPES = (
    "V_INT INTEGER, V_BIG BIGINT, V_SMALL SMALLINT, V_TINY TINYINT, V_VC VARCHAR, V_CHAR CHAR(5),"
    " V_DBL DOUBLE, V_FLT FLOAT, V_DEC DECIMAL(10, 2), V_BOOL BOOLEAN, V_DATE DATE, V_TIME TIME,"
    " V_TS TIMESTAMP, V_VB VARBINARY, V_BIN BINARY(4), V_ARR VARCHAR ARRAY, V_IARR INTEGER[], V_JSON JSON"
)
VALUES: dict[str, list[str]] = {
    "V_INT": ["NULL", "0", "-7", "2147483647"],
    "V_BIG": ["NULL", "10000000000", "-1"],
    "V_SMALL": ["NULL", "7"],
    "V_TINY": ["NULL", "1", "-128"],
    "V_VC": ["NULL", "''", "'foo'", "'q\"\\'", "'tab\there'", "'100%s'", "'ü€'"],
    "V_CHAR": ["NULL", "'ab'", "'abcde'"],
    "V_DBL": ["NULL", "1.5", "1e10", "0.0", "-2.25", "0.001", "1e-5", "123456789.0"],
    "V_FLT": ["NULL", "0.1", "3.0"],
    "V_DEC": ["NULL", "12.50", "1000", "-0.01"],
    "V_BOOL": ["NULL", "true", "false"],
    "V_DATE": ["NULL", "TO_DATE('2024-05-28 09:55:30.123')"],
    "V_TIME": ["NULL", "TO_DATE('2024-05-28 09:55:30.123')"],
    "V_TS": ["NULL", "TO_TIMESTAMP('2024-05-28 09:55:30.123456')"],
    "V_VB": ["NULL", "x'010203FF'"],
    "V_BIN": ["NULL", "x'01020304'"],
    "V_ARR": ["NULL", "ARRAY['a', 'b']"],
    "V_IARR": ["NULL", "ARRAY[1, 2, 3]"],
    "V_JSON": ["NULL", "'{\"a\": [1, 2]}'"],
}


def _history(db: Path, immutable: bool) -> None:
    """A randomized history: inserts, partial updates, NULLs written, deletes, a delete and
    re-write in one transaction, and rows expiring (``TTL``) into ``ttl_delete`` events."""
    rng = random.Random(11 + immutable)
    clock = Clock()
    c = changefeed.connect(db, clock=clock)
    props = ", IMMUTABLE_ROWS=true" if immutable else ""
    c.execute(
        f"CREATE TABLE T (K1 INTEGER NOT NULL, K2 VARCHAR NOT NULL, {TYPES}"
        f" CONSTRAINT PK PRIMARY KEY (K1, K2)) TTL=100, SALT_BUCKETS=2{props}"
    )
    c.execute("CREATE CDC C ON T INCLUDE (PRE, POST, CHANGE) SALT_BUCKETS = 2")
    cols = list(VALUES)
    for step in range(160):
        clock.now += rng.choice([0, 1, 7]) * MS
        with c.transaction():
            for _ in range(rng.randint(1, 4)):
                k1, k2 = rng.randint(0, 6), rng.choice(["a", "b"])
                if rng.random() < 0.15:
                    c.execute("DELETE FROM T WHERE K1 = ? AND K2 = ?", (k1, k2))
                    continue
                chosen = [x for x in cols if rng.random() < 0.4] or ["V_INT"]
                row = ", ".join(rng.choice(VALUES[x]) for x in chosen)
                c.execute(f"UPSERT INTO T (K1, K2, {', '.join(chosen)}) VALUES ({k1}, '{k2}', {row})")
        if step == 120:  # the rows not written since expire: GC records their ttl_delete events
            clock.now += 101_000 * MS
            collect_garbage(c.db, now_ns=clock.now, min_age=0)
    c.close()


def _tables(opts: ps._Options, part: ps.RangePartition) -> tuple[pa.Table, pa.Table]:
    fast = ps._arrow_batches(opts, part)
    assert fast is not None
    schema = ps.arrow_schema(opts.table)
    arrow = pa.Table.from_batches([b for b, _ in fast], schema=schema)
    plain = pa.Table.from_batches(list(ps._sqlite_batches(opts, part, None)), schema=schema)
    return arrow, plain


@pytest.mark.parametrize("immutable", [False, True])
def test_adbc_read_equals_the_sqlite3_read(tmp_path: Path, immutable: bool, monkeypatch: Any) -> None:
    db = tmp_path / "db"
    _history(db, immutable)
    monkeypatch.setattr(ps, "CHUNK", 37)  # many batches, so many groups of shapes per batch
    checked = 0
    for n in range(len(SCOPES) + 1):
        for scopes in itertools.combinations(SCOPES, n):
            opts = ps._Options({"path": str(db), "cdc": "C", "include": ",".join(scopes)})
            for bucket in range(2):
                arrow, plain = _tables(opts, ps.RangePartition(bucket, 0, 1 << 62))
                assert arrow.num_rows > 50  # (buckets follow the data table's salt since Phoenix 5.3 streams)
                assert arrow.equals(plain)
                checked += arrow.num_rows
                if "POST" in scopes:
                    texts = arrow.column("cdc_json").to_pylist()
                    assert any('"ttl_delete"' in t for t in texts)
                    assert any('"delete"' in t for t in texts)
    assert checked > 1000


def test_a_value_outside_its_storage_class_falls_back_mid_partition(tmp_path: Path, monkeypatch: Any) -> None:
    """A text in an INTEGER column's change row fails the Arrow read after batches were yielded:
    the rest of the partition comes through sqlite3, with nothing lost or repeated."""
    db = tmp_path / "db"
    _history(db, False)
    monkeypatch.setattr(ps, "CHUNK", 25)
    opts = ps._Options({"path": str(db), "cdc": "C", "include": "PRE,POST"})
    part = ps.RangePartition(0, 0, 1 << 62)
    t = opts.table
    col = next(c for c in t.stored_values if c.name == "V_INT")
    raw = sqlite3.connect(db / "changefeed.db")
    seqs = [s for (s,) in raw.execute(f"SELECT seq FROM p{t.id} WHERE b = 0 ORDER BY ms, c0, c1, seq")]
    with raw:
        raw.execute(f"UPDATE x{t.id} SET {col.db} = 'text' WHERE seq = ?", (seqs[len(seqs) // 2],))
    raw.close()
    got = pa.Table.from_batches(list(ps.read_range(opts, part)), schema=ps.arrow_schema(t))
    want = pa.Table.from_batches(list(ps._sqlite_batches(opts, part, None)), schema=ps.arrow_schema(t))
    assert got.num_rows == len(seqs)
    assert got.equals(want)
    with pytest.raises(ps._ReadFallback):
        for _ in ps._arrow_batches(opts, part) or ():
            pass
