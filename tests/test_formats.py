"""YDB JSON and Debezium JSON encoders: golden records, the spec's samples, real engine changes,
and the Spark face agreeing byte for byte with the Python face.

Golden files (tests/golden/ydb/*.json) hold a table, change rows in user-level values and the
expected records for every format and mode. ``CHANGEFEED_REGEN_GOLDEN=1`` rewrites their
``expected`` sections from the Python encoders (review the diff!).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import os
import random
import struct
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT, read_changes, rows_to_batch
from changefeed.engine.clock import CommitTs
from changefeed.engine.storage import CHANGE_ERASE, CHANGE_UPSERT
from changefeed.engine.types import Kind
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.formats import get_encoder, partition_of, values as V
from changefeed.formats.base import ColumnarEncoder, Record

GOLDEN = Path(__file__).parent / "golden" / "ydb"
FORMATS = ("ydb-json", "debezium-json")
REGEN = os.environ.get("CHANGEFEED_REGEN_GOLDEN") == "1"


# ============================================================================ helpers


def ordered(x: Any) -> Any:
    """JSON value with objects as lists of (name, value): comparisons see member order."""
    if isinstance(x, dict):
        return [(k, ordered(v)) for k, v in x.items()]
    if isinstance(x, list):
        return [ordered(v) for v in x]
    return x


def parse(b: bytes | None) -> Any:
    assert b is not None
    return ordered(json.loads(b))


def feed_of(
    table: TableSchema, fmt: str, mode: Mode, *, virtual: bool = False, partitions: int = 4
) -> FeedSpec:
    return FeedSpec(
        id=1,
        table_id=table.id,
        name="feed",
        kind="ydb",
        topic=f"{table.short_name}/feed",
        partitions=partitions,
        format=fmt,
        mode=mode,
        virtual_timestamps=virtual,
    )


def make_table(tmp_path: Path, create: str) -> TableSchema:
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    try:
        conn.execute(create)
        conn.db.refresh_catalog()
        name = create.split()[2].split("(")[0]
        schema = conn.db.find_table(name)
        assert schema is not None
        return schema
    finally:
        conn.close()


def storage_row(table: TableSchema, spec: dict[str, Any], seq: int) -> tuple[Any, ...]:
    """A change row (storage values) from a golden row in user-level values."""
    new, old, written = spec.get("new", {}), spec.get("old", {}), set(spec.get("written", []))
    cols = table.stored
    vals = [c for c in cols if not c.is_key]
    row: list[Any] = [seq, spec["ts"], 0, spec["tx"], spec["op"], int(spec.get("ox", False)), 0]
    row += [c.type.to_db(c.type.coerce(new.get(c.name))) for c in cols]
    row += [1 if c.name in written else None for c in vals]
    row += [c.type.to_db(c.type.coerce(old.get(c.name))) for c in vals]
    return tuple(row)


def case_name(fmt: str, mode: Mode, virtual: bool) -> str:
    return f"{fmt} {mode.value}" + (" VIRTUAL_TIMESTAMPS" if virtual else "")


def golden_cases() -> list[Path]:
    return sorted(GOLDEN.glob("*.json"))


def load_golden(path: Path) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    g = json.loads(path.read_text())
    return g["create"], g["rows"], g["feeds"], g.get("expected", {})


def golden_batch(tmp_path: Path, path: Path) -> tuple[TableSchema, pa.RecordBatch]:
    create, rows, _, _ = load_golden(path)
    table = make_table(tmp_path, create)
    batch = rows_to_batch(table, [storage_row(table, r, i + 1) for i, r in enumerate(rows)])
    return table, batch


def records_json(records: list[Record]) -> list[dict[str, Any]]:
    return [{"key": json.loads(k or b"null"), "value": json.loads(v)} for _, k, v, _ in records]


# ============================================================================ golden records


@pytest.mark.parametrize("path", golden_cases(), ids=lambda p: p.stem)
def test_golden_python(tmp_path: Path, path: Path) -> None:
    table, batch = golden_batch(tmp_path, path)
    _, _, feeds, expected = load_golden(path)
    produced: dict[str, Any] = {}
    for f in feeds:
        mode, virtual = Mode(f["mode"]), bool(f.get("virtual_timestamps", False))
        for fmt in f.get("formats", FORMATS):
            feed = feed_of(table, fmt, mode, virtual=virtual)
            encoder = get_encoder(fmt)
            records = encoder.encode_python(batch, table, feed)
            if isinstance(encoder, ColumnarEncoder):  # the column-wise face gives the same records
                t = encoder.encode_batch(batch, table, feed)
                cols = [t.column(n).to_pylist() for n in ("partition", "key", "value", "ts")]
                assert list(zip(*cols, strict=True)) == records
            name = case_name(fmt, mode, virtual)
            produced[name] = records_json(records)
            for p, k, _v, ts in records:
                assert k is not None and p == partition_of(k, feed.partitions)
                assert ts in batch.column("ts").to_pylist()
    if REGEN:
        g = json.loads(path.read_text())
        g["expected"] = produced
        path.write_text(json.dumps(g, indent=2, ensure_ascii=False) + "\n")
        return
    assert sorted(produced) == sorted(expected)
    for name in expected:
        assert ordered(produced[name]) == ordered(expected[name]), name


@pytest.mark.spark
@pytest.mark.parametrize("path", golden_cases(), ids=lambda p: p.stem)
def test_golden_spark(spark: Any, tmp_path: Path, path: Path) -> None:
    table, batch = golden_batch(tmp_path, path)
    _, _, feeds, _ = load_golden(path)
    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    for f in feeds:
        mode, virtual = Mode(f["mode"]), bool(f.get("virtual_timestamps", False))
        for fmt in f.get("formats", FORMATS):
            feed = feed_of(table, fmt, mode, virtual=virtual)
            enc = get_encoder(fmt)
            assert_same(enc.encode_spark(df, table, feed), enc.encode_python(batch, table, feed))


# ============================================================================ the spec's samples

SPEC_UPDATES = """{"key": [1, "one"], "update": {"payload": "lorem ipsum", "date": "2022-02-22"}}"""
SPEC_ERASE = """{"key": [2, "two"], "erase": {}}"""
SPEC_IMAGES = """{"key": [1, 2, 3], "update": {},
   "newImage": {"textColumn": "value1", "intColumn": 101, "boolColumn": true},
   "oldImage": {"textColumn": null, "intColumn": 100, "boolColumn": false}}"""
SPEC_VIRTUAL = """{"key": [1], "update": {"created": "2022-12-12T00:00:00.000000Z", "customer": "Name123"},
   "ts": [1670792400890, 562949953607163]}"""


def test_spec_samples(tmp_path: Path) -> None:
    enc = get_encoder("ydb-json")
    t1 = make_table(
        tmp_path / "1", "CREATE TABLE t1 (k Uint64, s Utf8, payload Utf8, date Date, PRIMARY KEY (k, s))"
    )
    rows = [
        {"op": CHANGE_UPSERT, "ts": 1, "tx": 1, "written": ["payload", "date"],
         "new": {"k": 1, "s": "one", "payload": "lorem ipsum", "date": "2022-02-22"}},
        {"op": CHANGE_ERASE, "ox": True, "ts": 2, "tx": 2, "new": {"k": 2, "s": "two"}, "old": {"payload": "x"}},
    ]  # fmt: skip
    batch = rows_to_batch(t1, [storage_row(t1, r, i) for i, r in enumerate(rows)])
    out = enc.encode_python(batch, t1, feed_of(t1, "ydb-json", Mode.UPDATES))
    assert [parse(v) for _, _, v, _ in out] == [
        ordered(json.loads(SPEC_UPDATES)),
        ordered(json.loads(SPEC_ERASE)),
    ]
    assert out[0][1] == b'[1,"one"]'
    assert out[1][1] == b'[2,"two"]'

    t2 = make_table(
        tmp_path / "2",
        "CREATE TABLE t2 (a Uint64, b Uint64, c Uint64, textColumn Utf8, intColumn Int32, boolColumn Bool, "
        "PRIMARY KEY (a, b, c))",
    )
    row = {"op": CHANGE_UPSERT, "ox": True, "ts": 5, "tx": 5, "written": ["textColumn", "intColumn", "boolColumn"],
           "new": {"a": 1, "b": 2, "c": 3, "textColumn": "value1", "intColumn": 101, "boolColumn": True},
           "old": {"textColumn": None, "intColumn": 100, "boolColumn": False}}  # fmt: skip
    batch = rows_to_batch(t2, [storage_row(t2, row, 1)])
    ((_, key, value, _),) = enc.encode_python(batch, t2, feed_of(t2, "ydb-json", Mode.NEW_AND_OLD_IMAGES))
    assert parse(value) == ordered(json.loads(SPEC_IMAGES))
    assert key == b"[1,2,3]"

    t3 = make_table(
        tmp_path / "3", "CREATE TABLE t3 (id Uint64, created Timestamp, customer Utf8, PRIMARY KEY (id))"
    )
    row = {"op": CHANGE_UPSERT, "ts": 1670792400890 * 1_000_000 + 123_456, "tx": 562949953607163,
           "written": ["created", "customer"], "new": {"id": 1, "created": "2022-12-12T00:00:00Z", "customer": "Name123"}}  # fmt: skip
    batch = rows_to_batch(t3, [storage_row(t3, row, 1)])
    ((_, _, value, ts),) = enc.encode_python(batch, t3, feed_of(t3, "ydb-json", Mode.UPDATES, virtual=True))
    assert parse(value) == ordered(json.loads(SPEC_VIRTUAL))
    assert ts == row["ts"]
    assert value == orjson.dumps(json.loads(SPEC_VIRTUAL))  # compact wire form


def test_resolved() -> None:
    feed = FeedSpec(1, 1, "f", "ydb", "t/f", 1, "ydb-json", Mode.UPDATES)
    ts = CommitTs(1670792400890_123456, 3)
    assert (
        get_encoder("ydb-json").resolved(ts, 562949953607163, feed)
        == b'{"resolved":[1670792400890,562949953607163]}'
    )
    assert get_encoder("debezium-json").resolved(ts, 7, feed) == b'{"payload":{"resolved":[1670792400890,7]}}'
    # a feed with barriers (BARRIERS_INTERVAL): YDB's barrier, the step rounded down, txId 0
    barriers = FeedSpec(1, 1, "f", "ydb", "t/f", 1, "ydb-json", Mode.UPDATES, resolved_ns=10_000_000_000)
    assert (
        get_encoder("ydb-json").resolved(ts, 562949953607163, barriers) == b'{"resolved":[1670792400000,0]}'
    )
    assert (
        get_encoder("debezium-json").resolved(ts, 7, barriers)
        == b'{"payload":{"resolved":[1670792400000,0]}}'
    )


def test_unknown_format() -> None:
    from changefeed.exceptions import InvalidOption

    with pytest.raises(InvalidOption, match=r"unknown format 'nope'; known formats: .*ydb-json"):
        get_encoder("nope")


# ============================================================================ real engine changes


def test_engine_changes(tmp_path: Path) -> None:
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    conn.execute(
        "CREATE TABLE orders (id Uint64, region Utf8, amount Decimal(22,9), note Utf8, PRIMARY KEY (id, region)) "
        "WITH (CHANGES = TRUE)"
    )
    conn.execute(
        "UPSERT INTO orders (id, region, amount, note) VALUES (1, 'eu', CAST('10.5' AS Decimal(22,9)), 'first')"
    )
    conn.execute("UPDATE orders SET note = 'second' WHERE id = 1")
    with conn.transaction():  # net change of one transaction: one record
        conn.execute("UPSERT INTO orders (id, region, note) VALUES (2, 'us', 'a')")
        conn.execute("UPSERT INTO orders (id, region, note) VALUES (2, 'us', 'b')")
    conn.execute("DELETE FROM orders WHERE id = 1")
    conn.db.refresh_catalog()
    table = conn.db.find_table("orders")
    assert table is not None
    batch = read_changes(conn.db.conn, table, 0, 10**18)
    conn.close()
    assert batch.num_rows == 4
    txs = batch.column("tx").to_pylist()
    tss = batch.column("ts").to_pylist()

    def values(fmt: str, mode: Mode, virtual: bool = False) -> list[Any]:
        out = get_encoder(fmt).encode_python(batch, table, feed_of(table, fmt, mode, virtual=virtual))
        return [json.loads(v) for _, _, v, _ in out]

    # The engine decides which columns a transaction "wrote" (u<id>): an UPSERT creating a row
    # may count the columns it left NULL as written; the encoder follows the flags.
    amount_id = table.column("amount").id
    inserted: dict[str, Any] = {"note": "b"}
    if batch.column(f"u{amount_id}").to_pylist()[2]:
        inserted = {"amount": None, "note": "b"}
    assert values("ydb-json", Mode.UPDATES, True) == [
        {
            "key": [1, "eu"],
            "update": {"amount": "10.500000000", "note": "first"},
            "ts": [tss[0] // 10**6, txs[0]],
        },
        {"key": [1, "eu"], "update": {"note": "second"}, "ts": [tss[1] // 10**6, txs[1]]},
        {"key": [2, "us"], "update": inserted, "ts": [tss[2] // 10**6, txs[2]]},
        {"key": [1, "eu"], "erase": {}, "ts": [tss[3] // 10**6, txs[3]]},
    ]
    assert values("ydb-json", Mode.NEW_AND_OLD_IMAGES) == [
        {"key": [1, "eu"], "update": {}, "newImage": {"amount": "10.500000000", "note": "first"}},
        {"key": [1, "eu"], "update": {},
         "newImage": {"amount": "10.500000000", "note": "second"}, "oldImage": {"amount": "10.500000000", "note": "first"}},
        {"key": [2, "us"], "update": {}, "newImage": {"amount": None, "note": "b"}},
        {"key": [1, "eu"], "erase": {}, "oldImage": {"amount": "10.500000000", "note": "second"}},
    ]  # fmt: skip
    deb = values("debezium-json", Mode.NEW_AND_OLD_IMAGES)
    assert [d["payload"]["op"] for d in deb] == ["c", "u", "c", "d"]
    assert deb[1]["payload"]["before"] == {"id": 1, "region": "eu", "amount": "10.500000000", "note": "first"}
    assert deb[1]["payload"]["after"] == {"id": 1, "region": "eu", "amount": "10.500000000", "note": "second"}
    assert "after" not in deb[3]["payload"] and deb[3]["payload"]["before"]["note"] == "second"
    assert deb[0]["payload"]["source"] == {
        "connector": "ydb", "version": "1.0.0", "ts_ms": tss[0] // 10**6, "step": tss[0] // 10**6,
        "txId": txs[0], "snapshot": False,
    }  # fmt: skip
    assert [d["payload"]["op"] for d in values("debezium-json", Mode.NEW_IMAGE)] == ["u", "u", "u", "d"]
    keys = [
        k
        for _, k, _, _ in get_encoder("debezium-json").encode_python(
            batch, table, feed_of(table, "debezium-json", Mode.KEYS_ONLY)
        )
    ]
    assert keys[0] == b'{"payload":{"id":1,"region":"eu"}}'


# ============================================================================ value rendering


def test_java_double() -> None:
    cases = [
        (0.0, "0.0"), (-0.0, "-0.0"),
        (1.0, "1.0"), (0.1, "0.1"), (100.0, "100.0"), (1e7, "1.0E7"), (9999999.0, "9999999.0"),
        (1e-3, "0.001"), (0.00099, "9.9E-4"), (1e23, "1.0E23"), (2e23, "2.0E23"), (1.5e-5, "1.5E-5"),
        (-123.25, "-123.25"), (5e-324, "4.9E-324"), (1e-323, "9.9E-324"), (1e-322, "9.9E-323"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (float("nan"), '"NaN"'), (float("inf"), '"Infinity"'), (float("-inf"), '"-Infinity"'),
    ]  # fmt: skip
    for x, text in cases:
        assert V.java_double(x) == text, x
    for x, _ in cases:
        if math.isfinite(x):
            assert float(V.java_double(x)) == x


def test_json_string_escapes() -> None:
    assert V.json_string('a"b\\c') == '"a\\"b\\\\c"'
    assert V.json_string("\x00\x1f\n\t\x0b") == '"\\u0000\\u001F\\n\\t\\u000B"'
    assert V.json_string("\\u001a") == '"\\\\u001a"'  # a literal backslash-u stays as written
    assert V.json_string("é😀\u2028/") == '"é😀\u2028/"'
    for s in ["\x00\x1f\n\t\x0b", "\\u001a", 'x"\x01']:
        assert json.loads(V.json_string(s)) == s


def test_python_values_per_type() -> None:
    from changefeed.engine.type_names import resolve_type

    def r(type_name: str, v: Any, params: tuple[int, ...] = ()) -> str:
        return V.python_value(v, resolve_type(type_name, params, dialect="sql"))

    assert r("Bool", True) == "true" and r("Bool", None) == "null"
    assert r("Uint64", Decimal(2**64 - 1)) == "18446744073709551615"
    assert r("Int8", -5) == "-5"
    assert r("Decimal", Decimal("10.5"), (22, 9)) == '"10.500000000"'
    assert r("Decimal", Decimal("0.000000001"), (22, 9)) == '"0.000000001"'
    assert r("String", b"\x00\xff") == '"AP8="'
    assert r("Date", dt.date(2022, 2, 22)) == '"2022-02-22"'
    assert r("Datetime", dt.datetime(2022, 12, 12, tzinfo=dt.UTC)) == '"2022-12-12T00:00:00Z"'
    assert r("Timestamp", dt.datetime(2022, 12, 12, tzinfo=dt.UTC)) == '"2022-12-12T00:00:00.000000Z"'
    assert (
        r("Timestamp", dt.datetime(1969, 12, 31, 23, 59, 58, 500000, tzinfo=dt.UTC))
        == '"1969-12-31T23:59:58.500000Z"'
    )
    assert r("Interval", -1_500_000) == "-1500000"
    assert r("Json", '{"a":[1,2]}') == '{"a":[1,2]}'
    assert r("Uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8") == '"6ba7b810-9dad-11d1-80b4-00c04fd430c8"'
    assert r("Utf8", None) == "null"


# ============================================================================ Spark == Python

YDB_TYPES = (
    "CREATE TABLE ty (id Uint64, k2 Utf8, b Bool, i8 Int8, i16 Int16, i32 Int32, i64 Int64, u8 Uint8, u16 Uint16, "
    "u32 Uint32, u64 Uint64, f Float, d Double, dec Decimal(22,9), s String, u Utf8, j Json, jd JsonDocument, "
    "dt Date, dtm Datetime, ts Timestamp, iv Interval, uu Uuid, PRIMARY KEY (id, k2))"
)
CRDB_TYPES = (
    "CREATE TABLE cr (k STRING, n DECIMAL, ip INET, bits BIT(3), arr STRING[], t TIMESTAMP, tm TIME, j JSONB, "
    "byt BYTES, vi INTERVAL, r REAL, PRIMARY KEY (k))"
)

_TEXT_ALPHABET = 'abcXYZ 019"\\/\x00\x01\x1f\x7f\n\t\r\x0béü€\u2028😀{}[]:,'


def _random_single(rng: random.Random) -> float:
    """A value a 32-bit float column holds: any finite single-precision number (subnormals
    too), or a special one."""
    if rng.random() < 0.05:
        return rng.choice([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e-45, 0.1])
    while True:
        x = float(struct.unpack("<f", struct.pack("<I", rng.getrandbits(32)))[0])
        if math.isfinite(x):
            return x


def _random_double(rng: random.Random) -> float:
    pick = rng.random()
    if pick < 0.05:
        return rng.choice([0.0, -0.0, float("nan"), float("inf"), float("-inf"), 5e-324, 1e-323, 1e23])
    if pick < 0.4:
        return round(rng.uniform(-1e6, 1e6), rng.randint(0, 6))
    if pick < 0.5:  # subnormal
        return float(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(52)))[0])
    while True:
        x = float(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0])
        if math.isfinite(x):
            return x


def random_value(rng: random.Random, col: Any, *, key: bool = False) -> Any:
    """A random canonical Python value for a column (None now and then)."""
    t = col.type
    if not key and rng.random() < 0.15:
        return None
    k = t.kind
    if k is Kind.BOOL:
        return rng.random() < 0.5
    if k in (Kind.INT, Kind.UINT):
        lo, hi = (0, (1 << t.bits) - 1) if k is Kind.UINT else (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1)
        return rng.choice([lo, hi, 0, 1, rng.randint(lo, hi)])
    if k is Kind.FLOAT:
        return _random_double(rng) if t.bits > 32 else _random_single(rng)
    if k is Kind.DECIMAL:
        if t.precision is None:
            return Decimal(rng.choice(["0", "1.5", "-123456789.000001", "1E+5", "3.14159"]))
        return Decimal(rng.randint(-(10**21), 10**21)).scaleb(-9).quantize(Decimal("1e-9"))
    if k is Kind.TEXT:
        return "".join(rng.choice(_TEXT_ALPHABET) for _ in range(rng.randint(0, 12)))
    if k is Kind.BYTES:
        return rng.randbytes(rng.choice([0, 1, 2, 3, 40, 100]))
    if k is Kind.DATE:
        return dt.date(1, 1, 1) + dt.timedelta(days=rng.randint(0, 3_652_000))
    if k in (Kind.DATETIME, Kind.TIMESTAMP):
        us = rng.randint(-62_135_596_800_000_000, 253_402_300_799_999_999)
        v = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)
        v = v.replace(microsecond=0) if k is Kind.DATETIME else v
        return v if t.zoned else v.replace(tzinfo=None)
    if k is Kind.INTERVAL:
        return dt.timedelta(microseconds=rng.randint(-(10**15), 10**15))
    if k is Kind.TIME:
        return dt.time(rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59), rng.randint(0, 999_999))
    if k is Kind.JSON:
        return orjson.dumps({"a": [1, 2.5, None, True], "s": "x\ny\u2028", "n": rng.randint(0, 9)}).decode()
    if k in (Kind.UUID,):
        return uuid.UUID(int=rng.getrandbits(128))
    if k is Kind.INET:
        return rng.choice(["192.168.0.1", "::1", "10.0.0.0/8"])
    if k is Kind.BIT:
        return "".join(rng.choice("01") for _ in range(t.length or 1))
    if k is Kind.ARRAY:
        return ["a", 'b"c', None][: rng.randint(0, 3)]
    raise AssertionError(f"no generator for {t}")


def random_rows(table: TableSchema, n: int, seed: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    cols = table.stored
    vals = [c for c in cols if not c.is_key]
    rows = []
    for seq in range(1, n + 1):
        op = rng.choice([CHANGE_UPSERT, CHANGE_UPSERT, CHANGE_ERASE, CHANGE_SNAPSHOT])
        ox = op != CHANGE_SNAPSHOT and rng.random() < 0.6
        ts = rng.randint(1_600_000_000_000_000_000, 1_900_000_000_000_000_000)
        row: list[Any] = [seq, ts, 0, rng.randint(1, 2**53), op, int(ox), 0]
        for c in cols:
            v = random_value(rng, c, key=c.is_key) if c.is_key or op != CHANGE_ERASE else None
            row.append(c.type.to_db(c.type.coerce(v)))
        row += [1 if op == CHANGE_UPSERT and rng.random() < 0.5 else None for _ in vals]
        row += [c.type.to_db(c.type.coerce(random_value(rng, c))) if ox else None for c in vals]
        rows.append(tuple(row))
    return rows


def assert_same(sdf: Any, expected: list[Record]) -> None:
    assert [f.name for f in sdf.schema.fields] == ["partition", "key", "value", "ts"]
    assert [f.dataType.simpleString() for f in sdf.schema.fields] == ["int", "binary", "binary", "bigint"]
    got = [(r.partition, bytes(r.key), bytes(r.value), r.ts) for r in sdf.collect()]
    assert len(got) == len(expected)
    for g, e in zip(sorted(got), sorted(expected), strict=True):
        assert g == e


@pytest.mark.spark
@pytest.mark.parametrize("create", [YDB_TYPES, CRDB_TYPES], ids=["ydb_types", "crdb_types"])
def test_spark_equals_python_random(spark: Any, tmp_path: Path, create: str) -> None:
    table = make_table(tmp_path, create)
    batch = rows_to_batch(table, random_rows(table, 400, seed=len(create)))
    df = spark.createDataFrame(pa.Table.from_batches([batch])).cache()
    for fmt in FORMATS:
        enc = get_encoder(fmt)
        for mode in Mode:
            for virtual in (False, True):
                feed = feed_of(table, fmt, mode, virtual=virtual, partitions=7)
                expected = enc.encode_python(batch, table, feed)
                for _, k, v, _ in expected:  # valid JSON, whatever the values
                    json.loads(v)
                    json.loads(k or b"")
                assert_same(enc.encode_spark(df, table, feed), expected)
    df.unpersist()


@pytest.mark.spark
def test_spark_doubles_and_strings(spark: Any) -> None:
    from pyspark.sql import functions as F

    from changefeed.engine.type_names import resolve_type

    rng = random.Random(7)
    doubles = [_random_double(rng) for _ in range(20_000)]
    doubles += [float(struct.unpack("<d", struct.pack("<Q", t))[0]) for t in range(1, 200)]
    texts = [
        "".join(chr(c) for c in range(0x80)),
        "\\u001a",
        *("".join(rng.choice(_TEXT_ALPHABET) for _ in range(8)) for _ in range(500)),
    ]
    blobs = [rng.randbytes(rng.randint(0, 300)) for _ in range(200)]
    df = spark.createDataFrame([(x,) for x in doubles], "d double")
    tdouble = resolve_type("Double", dialect="sql")
    got = [r[0] for r in df.select(V.spark_value(F.col("d"), tdouble)).collect()]
    assert got == [V.java_double(x) for x in doubles]
    df = spark.createDataFrame([(s,) for s in texts], "s string")
    got = [r[0] for r in df.select(V.spark_value(F.col("s"), resolve_type("Utf8", dialect="sql"))).collect()]
    assert got == [V.json_string(s) for s in texts]
    df = spark.createDataFrame([(b,) for b in blobs], "b binary")
    got = [
        r[0] for r in df.select(V.spark_value(F.col("b"), resolve_type("String", dialect="sql"))).collect()
    ]
    assert got == ['"' + base64.b64encode(b).decode() + '"' for b in blobs]
