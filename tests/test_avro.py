"""CockroachDB Avro (format ``crdb-avro``): schemas, type mapping, envelopes and wire bytes.

Golden files in tests/golden/avro/: ``types.json`` holds, per SQL type, the field's Avro type, a
value and the bytes it encodes to (``CHANGEFEED_REGEN_GOLDEN=1`` rewrites the expectations from the
encoder: review the diff). The spec's own examples (the core changefeed bytes, the BIT arrays, the
``office_dogs`` response) are checked verbatim. Schema ids come from an in-memory resolver here;
tests/test_schema_registry.py runs the same encoder against the registry server and Confluent's
deserializer.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT, rows_to_batch
from changefeed.engine.storage import CHANGE_ERASE, CHANGE_UPSERT
from changefeed.exceptions import InvalidOption, UnsupportedFeature
from changefeed.feeds.crdb_options import CrdbOptions, parse_crdb_options
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.formats import avro_schema as S, get_encoder, partition_of
from changefeed.formats.crdb_avro import (
    CrdbAvroEncoder,
    bits_to_longs,
    interval_iso8601,
    longs_to_bits,
)
from changefeed.formats.schema_registry import MemoryResolver

GOLDEN = Path(__file__).parent / "golden" / "avro"
REGEN = os.environ.get("CHANGEFEED_REGEN_GOLDEN") == "1"


# ============================================================================ helpers


def make_table(tmp_path: Path, *statements: str) -> TableSchema:
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    try:
        for s in statements:
            conn.execute(s)
        conn.db.refresh_catalog()
        name = statements[-1].split()[2].split("(")[0].strip('"')
        schema = conn.db.find_table(name)
        assert schema is not None
        return schema
    finally:
        conn.close()


def change_row(
    table: TableSchema,
    seq: int,
    new: dict[str, Any],
    *,
    op: int = CHANGE_UPSERT,
    old: dict[str, Any] | None = None,
    ts: int = 1_000,
    lg: int = 0,
) -> tuple[Any, ...]:
    cols = table.stored
    vals = [c for c in cols if not c.is_key]
    row: list[Any] = [seq, ts, lg, seq, op, int(old is not None), 0]
    row += [c.type.to_db(c.type.coerce(new.get(c.name))) for c in cols]
    row += [1 for _ in vals]
    row += [c.type.to_db(c.type.coerce((old or {}).get(c.name))) for c in vals]
    return tuple(row)


def feed_of(table: TableSchema, partitions: int = 1, **opts: Any) -> FeedSpec:
    """A CockroachDB feed with Avro options, as ``CREATE CHANGEFEED`` builds it."""
    return FeedSpec(
        id=1,
        table_id=table.id,
        name="f",
        kind="crdb",
        topic=table.short_name,
        partitions=partitions,
        format="crdb-avro",
        mode=Mode.NEW_AND_OLD_IMAGES,
        crdb=CrdbOptions(format="avro", **opts),
    )


def decode(framed: bytes, schemas: dict[int, Any]) -> Any:
    """Confluent framing -> (schema id, datum) via fastavro."""
    assert framed[:1] == b"\x00"
    sid = int.from_bytes(framed[1:5], "big")
    datum = fastavro.schemaless_reader(io.BytesIO(framed[5:]), schemas[sid], None)
    return sid, datum


def resolver_schemas(resolver: MemoryResolver) -> dict[int, Any]:
    return {sid: fastavro.parse_schema(json.loads(text)) for text, sid in resolver._ids.items()}


# ============================================================================ the spec's examples


def octal(b: bytes) -> str:
    """How a core changefeed prints non-printable bytes (``\\000``)."""
    return "".join(chr(x) if 0x20 <= x < 0x7F and x != 0x5C else f"\\{x:03o}" for x in b)


def test_core_changefeed_example_bytes(tmp_path: Path) -> None:
    """EXPERIMENTAL CHANGEFEED FOR cdc_test WITH format = avro against a fresh registry."""
    expected = (GOLDEN / "core_changefeed.txt").read_text().splitlines()
    table = make_table(tmp_path, "CREATE TABLE cdc_test (a INT PRIMARY KEY)")
    batch = rows_to_batch(table, [change_row(table, 1, {"a": 0})])
    resolver = MemoryResolver()
    enc = CrdbAvroEncoder(resolver)
    [(_, key, value, _)] = enc.encode_python(batch, table, feed_of(table))
    assert key is not None
    assert ["table,key,value", f"cdc_test,{octal(key)},{octal(value)}"] == expected
    assert key == b"\x00\x00\x00\x00\x01\x02\x00"
    assert value == b"\x00\x00\x00\x00\x02\x02\x02\x00"
    assert resolver.subjects == {"cdc_test-key": [1], "cdc_test-value": [2]}
    assert resolver._ids == {
        '{"type":"record","name":"cdc_test","fields":[{"type":["null","long"],"name":"a","default":null,'
        '"__crdb__":"a INT8 NOT NULL"}]}': 1,
        '{"type":"record","name":"cdc_test_envelope","fields":[{"type":["null",{"type":"record",'
        '"name":"cdc_test","fields":[{"type":["null","long"],"name":"a","default":null,'
        '"__crdb__":"a INT8 NOT NULL"}]}],"name":"after","default":null}]}': 2,
    }


def test_office_dogs_response(tmp_path: Path) -> None:
    """The spec's Responses table: insert and delete, Avro key and value."""
    table = make_table(tmp_path, "CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING)")
    rows = [
        change_row(table, 1, {"id": 1, "name": "Petee"}),
        change_row(table, 2, {"id": 1}, op=CHANGE_ERASE, old={"name": "Petee"}),
    ]
    resolver = MemoryResolver()
    out = CrdbAvroEncoder(resolver).encode_python(rows_to_batch(table, rows), table, feed_of(table))
    schemas = resolver_schemas(resolver)
    shown = []
    for _, k, v, _ in out:
        assert k is not None
        shown.append((decode(k, schemas)[1], decode(v, schemas)[1]))
    # fastavro reads unions to plain values: {"id":{"long":1}} is {"id": 1}
    assert shown == [
        ({"id": 1}, {"after": {"id": 1, "name": "Petee"}}),
        ({"id": 1}, {"after": None}),
    ]
    key_json = fastavro.json_writer  # the Avro JSON encoding shows the union branches
    buf = io.StringIO()
    key_json(buf, schemas[2], [{"after": {"id": 1, "name": "Petee"}}])
    assert json.loads(buf.getvalue()) == {
        "after": {"office_dogs": {"id": {"long": 1}, "name": {"string": "Petee"}}}
    }


def test_bit_examples() -> None:
    """BIT/VARBIT as arrays of 64-bit longs: the spec's 129- and 136-bit examples."""
    g = json.loads((GOLDEN / "bits.json").read_text())
    for case in g["cases"]:
        bits = "".join(case["bits"])
        arr = bits_to_longs(bits)
        assert len(bits) == case["length"]
        unsigned = [arr[0]] + [w & ((1 << 64) - 1) for w in arr[1:]]
        if "array" in case:
            assert unsigned == case["array"], case["name"]
        if "shape" in case:
            assert len(arr) == case["shape"]["len"] and arr[0] == case["shape"]["first"]
            assert unsigned[-1] in case["shape"]["last_in"]
        assert longs_to_bits(arr) == bits
    assert bits_to_longs("010") == [3, 4611686018427387904]
    assert bits_to_longs("") == [0]


def test_interval_iso8601() -> None:
    day = 86_400_000_000
    assert interval_iso8601(3 * day + (4 * 3600 + 5 * 60 + 6) * 1_000_000) == "P3DT4H5M6S"
    assert interval_iso8601(-6_000) == "PT-0.006S"
    assert interval_iso8601(0) == "PT0S"
    assert interval_iso8601(day) == "P1D"


# ============================================================================ the type mapping


def _types_golden() -> dict[str, Any]:
    return dict(json.loads((GOLDEN / "types.json").read_text()))


def test_type_mapping_golden(tmp_path: Path) -> None:
    g = _types_golden()
    cases = g["cases"]
    stmts = [s for s in g.get("setup", [])]
    cols = ", ".join(f"{c['column']} {c['sql']}" for c in cases)
    table = make_table(tmp_path, *stmts, f"CREATE TABLE types (k INT PRIMARY KEY, {cols})")
    batch = rows_to_batch(table, [change_row(table, 1, {"k": 1, **{c["column"]: c["value"] for c in cases}})])
    resolver = MemoryResolver()
    [(_, _, value, _)] = CrdbAvroEncoder(resolver).encode_python(batch, table, feed_of(table))
    schemas = resolver_schemas(resolver)
    _, datum = decode(value, schemas)
    value_schema = json.loads(next(t for t, i in resolver._ids.items() if i == 2))
    fields = {f["name"]: f for f in value_schema["fields"][0]["type"][1]["fields"]}
    produced = []
    for c in cases:
        f = fields[c["column"]]
        got = datum["after"][c["column"]]
        produced.append(
            {
                **{k: c[k] for k in ("column", "sql", "value")},
                "avro": f["type"],
                "crdb": f["__crdb__"],
                "decoded": _jsonable(got),
            }
        )
    if REGEN:
        g["cases"] = produced
        (GOLDEN / "types.json").write_text(json.dumps(g, indent=2, ensure_ascii=False) + "\n")
        return
    assert produced == cases


def _jsonable(v: Any) -> Any:
    import datetime as dt
    from decimal import Decimal

    if isinstance(v, bytes):
        return {"bytes_hex": v.hex()}
    if isinstance(v, Decimal):
        return {"decimal": str(v)}
    if isinstance(v, dt.datetime | dt.date | dt.time):
        return {"iso": v.isoformat()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def test_reference_type_values(tmp_path: Path) -> None:
    """The reference's avro_test.go values: DATE 17898, TIME 11045000000, TIMESTAMP micros, DECIMAL \\f."""
    table = make_table(
        tmp_path,
        "CREATE TABLE r (k INT PRIMARY KEY, d DATE, t TIME, ts TIMESTAMP, n DECIMAL(4,1), j JSONB, ip INET)",
    )
    row = {
        "k": 1,
        "d": "2019-01-02",
        "t": "03:04:05",
        "ts": "2019-01-02 03:04:05",
        "n": "1.2",
        "j": '{"b": 1}',
        "ip": "190.0.0.0/24",
    }
    batch = rows_to_batch(table, [change_row(table, 1, row)])
    resolver = MemoryResolver()
    [(_, _, value, _)] = CrdbAvroEncoder(resolver).encode_python(batch, table, feed_of(table))
    schema = json.loads(next(t for t, i in resolver._ids.items() if i == 2))
    raw = fastavro.schemaless_reader(
        io.BytesIO(value[5:]), fastavro.parse_schema(schema), None, return_record_name=True
    )
    # read without logical types: the numbers on the wire
    plain = json.loads(json.dumps(schema).replace('"logicalType"', '"_lt"'))
    wire = fastavro.schemaless_reader(io.BytesIO(value[5:]), fastavro.parse_schema(plain), None)
    after = wire["after"]
    assert after["d"] == 17898
    assert after["t"] == 11045000000
    assert after["ts"] == 1546398245000000
    assert after["n"] == b"\x0c"  # unscaled 12: "\f"
    assert after["j"] == '{"b": 1}'
    assert after["ip"] == "190.0.0.0/24"
    assert raw["after"][0] == "r"


def test_unsupported_types(tmp_path: Path) -> None:
    table = make_table(tmp_path, "CREATE TABLE nd (k INT PRIMARY KEY, a DECIMAL)")
    batch = rows_to_batch(table, [])
    with pytest.raises(
        UnsupportedFeature, match="column a: decimal with no precision not yet supported with avro"
    ):
        CrdbAvroEncoder(MemoryResolver()).encode_python(batch, table, feed_of(table))


def test_row_envelope_refused() -> None:
    with pytest.raises(InvalidOption, match="envelope=row is not supported with format=avro"):
        S.AvroOptions(envelope="row")


def test_registry_required(tmp_path: Path) -> None:
    table = make_table(tmp_path, "CREATE TABLE rq (k INT PRIMARY KEY)")
    with pytest.raises(InvalidOption, match="confluent_schema_registry is required for format=avro"):
        CrdbAvroEncoder().encode_python(rows_to_batch(table, []), table, feed_of(table))


# ============================================================================ names


def test_names() -> None:
    assert S.avro_name("☃") == "_u2603_"
    assert S.avro_name("🍦") == "_u0001f366_"
    assert S.avro_name("drivers.primary") == "drivers_u002e_primary"
    assert S.avro_name("1a") == "_u0031_a"
    assert S.subjects("drivers") == ("drivers-key", "drivers-value")
    assert S.subjects("drivers", "super") == ("superdrivers-key", "superdrivers-value")
    assert S.subjects("movr.public.drivers") == ("movr.public.drivers-key", "movr.public.drivers-value")


def test_unicode_names_schema(tmp_path: Path) -> None:
    """avro_test.go: ``{"type":"record","name":"_u2603_","fields":[...🍦 INT8 NOT NULL]}``."""
    table = make_table(tmp_path, 'CREATE TABLE "☃" ("🍦" INT PRIMARY KEY)')
    key = S.schema_json(S.key_schema(table, S.AvroOptions()))
    assert key == (
        '{"type":"record","name":"_u2603_","fields":[{"type":["null","long"],"name":"_u0001f366_",'
        '"default":null,"__crdb__":"🍦 INT8 NOT NULL"}]}'
    )


# ============================================================================ envelopes


def _table_with_rows(tmp_path: Path) -> tuple[TableSchema, pa.RecordBatch]:
    table = make_table(tmp_path, "CREATE TABLE foo (a INT PRIMARY KEY, b STRING)")
    rows = [
        change_row(table, 1, {"a": 1, "b": "init"}, op=CHANGE_SNAPSHOT, ts=100),
        change_row(table, 2, {"a": 2, "b": "new"}, ts=200, lg=3),
        change_row(table, 3, {"a": 1, "b": "upd"}, old={"b": "init"}, ts=300),
        change_row(table, 4, {"a": 2}, op=CHANGE_ERASE, old={"b": "new"}, ts=400),
    ]
    return table, rows_to_batch(table, rows)


def _decoded(
    tmp_path: Path, partitions: int = 1, **opts: Any
) -> tuple[list[tuple[Any, Any]], MemoryResolver]:
    table, batch = _table_with_rows(tmp_path)
    resolver = MemoryResolver()
    feed = feed_of(table, partitions, **opts)
    out = CrdbAvroEncoder(resolver).encode_python(batch, table, feed)
    schemas = resolver_schemas(resolver)
    shown = []
    for p, k, v, ts in out:
        assert k is not None and p == partition_of(k, partitions)
        assert ts in batch.column("ts").to_pylist()
        shown.append((decode(k, schemas)[1], decode(v, schemas)[1] if v else v))
    return shown, resolver


def test_wrapped_updated_diff_mvcc(tmp_path: Path) -> None:
    shown, resolver = _decoded(tmp_path, 3, updated=True, diff=True, mvcc_timestamp=True)
    assert shown == [
        ({"a": 1}, {"before": None, "after": {"a": 1, "b": "init"}, "updated": "100.0000000000", "mvcc_timestamp": "100.0000000000"}),
        ({"a": 2}, {"before": None, "after": {"a": 2, "b": "new"}, "updated": "200.0000000003", "mvcc_timestamp": "200.0000000003"}),
        ({"a": 1}, {"before": {"a": 1, "b": "init"}, "after": {"a": 1, "b": "upd"}, "updated": "300.0000000000", "mvcc_timestamp": "300.0000000000"}),
        ({"a": 2}, {"before": {"a": 2, "b": "new"}, "after": None, "updated": "400.0000000000", "mvcc_timestamp": "400.0000000000"}),
    ]  # fmt: skip
    value = json.loads(next(t for t, i in resolver._ids.items() if i == 2))
    assert value["name"] == "foo_envelope"
    assert [f["name"] for f in value["fields"]] == ["before", "after", "updated", "mvcc_timestamp"]
    assert value["fields"][0]["type"][1]["name"] == "foo_before"


def test_bare_and_key_only(tmp_path: Path) -> None:
    shown, _ = _decoded(tmp_path / "bare", envelope="bare")
    assert shown[1] == ({"a": 2}, {"record": {"a": 2, "b": "new"}})
    assert shown[3] == ({"a": 2}, {"record": {"a": 2, "b": None}})
    shown, resolver = _decoded(tmp_path / "ko", envelope="key_only")
    assert [v for _, v in shown] == [b""] * 4
    assert list(resolver.subjects) == ["foo-key"]


def test_prefix_names(tmp_path: Path) -> None:
    _, resolver = _decoded(tmp_path, avro_schema_prefix="super")
    assert list(resolver.subjects) == ["superfoo-key", "superfoo-value"]
    key, value = (json.loads(t) for t in resolver._ids)
    assert (key["name"], key["namespace"]) == ("superfoo", "super")
    assert (value["name"], value["namespace"]) == ("superfoo_envelope", "super")
    assert value["fields"][0]["type"][1]["name"] == "foo"


def test_resolved_message(tmp_path: Path) -> None:
    from changefeed.engine.clock import CommitTs

    table = make_table(tmp_path, "CREATE TABLE rs (a INT PRIMARY KEY)")
    resolver = MemoryResolver()
    payload = CrdbAvroEncoder(resolver).resolved(CommitTs(1, 2), 0, feed_of(table))
    _, datum = decode(payload, resolver_schemas(resolver))
    assert datum == {"resolved": "1.0000000002"}
    assert list(resolver.subjects) == ["rs-value"]


def test_schema_change_registers_new_version(tmp_path: Path) -> None:
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    try:
        conn.execute("CREATE TABLE ev (a INT PRIMARY KEY, b STRING)")
        conn.db.refresh_catalog()
        t1 = conn.db.find_table("ev")
        conn.execute("ALTER TABLE ev ADD COLUMN c BOOL")
        conn.db.refresh_catalog()
        t2 = conn.db.find_table("ev")
    finally:
        conn.close()
    assert t1 is not None and t2 is not None
    resolver = MemoryResolver()
    enc = CrdbAvroEncoder(resolver)
    enc.encode_python(rows_to_batch(t1, [change_row(t1, 1, {"a": 1, "b": "x"})]), t1, feed_of(t1))
    enc.encode_python(rows_to_batch(t2, [change_row(t2, 2, {"a": 1, "b": "x", "c": True})]), t2, feed_of(t2))
    enc.encode_python(rows_to_batch(t2, [change_row(t2, 3, {"a": 2})]), t2, feed_of(t2))
    assert resolver.subjects == {"ev-key": [1], "ev-value": [2, 3]}


def test_registered_format() -> None:
    assert isinstance(get_encoder("crdb-avro"), CrdbAvroEncoder)


# ============================================================================ Spark


@pytest.mark.spark
def test_spark_equals_python(spark: Any, tmp_path: Path) -> None:
    g = _types_golden()
    cases = g["cases"]
    cols = ", ".join(f"{c['column']} {c['sql']}" for c in cases)
    table = make_table(tmp_path, *g.get("setup", []), f"CREATE TABLE types (k INT PRIMARY KEY, {cols})")
    rows = [
        change_row(table, 1, {"k": 1, **{c["column"]: c["value"] for c in cases}}),
        change_row(table, 2, {"k": 2}, old={c["column"]: c["value"] for c in cases}, ts=5, lg=1),
        change_row(table, 3, {"k": 3}, op=CHANGE_ERASE, old={}, ts=6),
    ]
    batch = rows_to_batch(table, rows)
    enc = CrdbAvroEncoder(MemoryResolver())
    feed = feed_of(table, 4, updated=True, diff=True)
    expected = enc.encode_python(batch, table, feed)
    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    got = enc.encode_spark(df, table, feed).collect()
    assert sorted((r["partition"], bytes(r["key"]), bytes(r["value"]), r["ts"]) for r in got) == sorted(
        expected
    )


# ============================================================================ the column-wise writer


@pytest.mark.parametrize(
    ("union", "values"),
    [
        (["null", "long"], [0, -1, 1, 63, -64, 64, 8191, -8193, 2**31, -(2**63), 2**63 - 1, None]),
        (["null", "string"], ["", "désolée", "x" * 300, "🍦", None]),
        (["null", "boolean"], [True, False, None]),
        (["null", "double"], [0.0, -1.5, 1e300, float("inf"), None]),
        (["null", "bytes"], [b"", b"\x00\xff", b"y" * 200, None]),
        (["null", {"type": "int", "logicalType": "date"}], [0, 17898, -1, None]),
        (["null", {"type": "long", "logicalType": "timestamp-micros"}], [1546398245000000, -1, None]),
        (["null", {"type": "array", "items": "long"}], [[3, 4611686018427387904], [0], None]),
    ],
)
def test_field_bytes_equal_fastavro(union: list[Any], values: list[Any]) -> None:
    """The hand-written column encoders write exactly what fastavro writes for the same union."""
    from changefeed.formats.crdb_avro import field_bytes

    parsed = fastavro.parse_schema(union)
    for v, got in zip(values, field_bytes(values, union), strict=True):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, v)
        assert got == buf.getvalue(), v


def test_reads_crdb_options(tmp_path: Path) -> None:
    """AvroOptions from a FeedSpec carrying CrdbOptions as CREATE CHANGEFEED parses them."""
    opts = parse_crdb_options(
        {
            "format": "avro",
            "confluent_schema_registry": "http://127.0.0.1:8081",
            "avro_schema_prefix": "super",
            "updated": None,
            "diff": None,
            "mvcc_timestamp": None,
            "envelope": "wrapped",
        },
        sink_scheme=None,
    )
    feed = replace(feed_of(make_table(tmp_path, "CREATE TABLE o (a INT PRIMARY KEY)")), crdb=opts)
    assert S.AvroOptions.from_feed(feed) == S.AvroOptions(
        envelope="wrapped",
        updated=True,
        diff=True,
        mvcc_timestamp=True,
        prefix="super",
        registry="http://127.0.0.1:8081",
    )


def test_virtual_columns(tmp_path: Path) -> None:
    """Virtual computed columns are left out, or null fields with virtual_columns='null'."""
    table = make_table(tmp_path, "CREATE TABLE vc (a INT PRIMARY KEY, b INT, c INT AS (b + 1) VIRTUAL)")
    assert [c.name for c in table.columns if c.virtual] == ["c"]
    batch = rows_to_batch(table, [change_row(table, 1, {"a": 1, "b": 2})])
    for virtual, fields, after in (
        ("omitted", ["a", "b"], {"a": 1, "b": 2}),
        ("null", ["a", "b", "c"], {"a": 1, "b": 2, "c": None}),
    ):
        resolver = MemoryResolver()
        feed = feed_of(table, diff=True, virtual_columns=virtual)
        [(_, _, value, _)] = CrdbAvroEncoder(resolver).encode_python(batch, table, feed)
        schema = json.loads(next(t for t, i in resolver._ids.items() if i == 2))
        assert [f["name"] for f in schema["fields"][1]["type"][1]["fields"]] == fields
        assert decode(value, resolver_schemas(resolver))[1] == {"before": None, "after": after}


def test_column_dropped_and_added_again(tmp_path: Path) -> None:
    """Same schema text, new storage column: the encoder reads the new column."""
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    try:
        conn.execute("CREATE TABLE re (a INT PRIMARY KEY, b STRING)")
        conn.db.refresh_catalog()
        t1 = conn.db.find_table("re")
        conn.execute("ALTER TABLE re DROP COLUMN b")
        conn.execute("ALTER TABLE re ADD COLUMN b STRING")
        conn.db.refresh_catalog()
        t2 = conn.db.find_table("re")
    finally:
        conn.close()
    assert t1 is not None and t2 is not None
    assert t1.column("b").db != t2.column("b").db
    resolver = MemoryResolver()
    enc = CrdbAvroEncoder(resolver)
    enc.encode_python(rows_to_batch(t1, [change_row(t1, 1, {"a": 1, "b": "old"})]), t1, feed_of(t1))
    [(_, _, value, _)] = enc.encode_python(
        rows_to_batch(t2, [change_row(t2, 2, {"a": 1, "b": "new"})]), t2, feed_of(t2)
    )
    assert decode(value, resolver_schemas(resolver))[1] == {"after": {"a": 1, "b": "new"}}
    assert resolver.subjects == {"re-key": [1], "re-value": [2]}  # one schema: same id


# ============================================================================ column-wise vs fastavro


def _reference(
    batch: pa.RecordBatch, table: TableSchema, feed: FeedSpec, resolver: MemoryResolver
) -> list[Any]:
    """Every message of a batch the plain way: one datum per row, fastavro per key and value."""
    from changefeed.formats.crdb_avro import column_values

    opts = S.AvroOptions.from_feed(feed)
    ids = {text: sid for text, sid in resolver._ids.items()}
    key_text, value_text = S.schema_json(S.key_schema(table, opts)), S.value_schema(table, opts)
    cols = S.row_columns(table, opts)

    def values(c: Any, old: bool = False) -> list[Any]:
        if c.virtual:
            return [None] * batch.num_rows
        return column_values(batch.column(f"o{c.id}" if old and not c.is_key else c.db), c.type)

    new = {c.name: values(c) for c in cols}
    before = {c.name: values(c, old=True) for c in cols}
    ops, oxs = batch.column("op").to_pylist(), batch.column("ox").to_pylist()
    tss, lgs = batch.column("ts").to_pylist(), batch.column("lg").to_pylist()

    def write(schema_text: str, datum: Any) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(json.loads(schema_text)), datum)
        return b"\x00" + ids[schema_text].to_bytes(4, "big") + buf.getvalue()

    out = []
    for i in range(batch.num_rows):
        erased = ops[i] == CHANGE_ERASE
        key = write(key_text, {S.avro_name(c.name): new[c.name][i] for c in table.key})
        row = {S.avro_name(c.name): new[c.name][i] for c in cols}
        if value_text is None:
            out.append((key, b""))
            continue
        datum: dict[str, Any] = {}
        if opts.envelope == S.ENVELOPE_BARE:
            datum["record"] = {
                k: None if erased and not c.is_key else v for (k, v), c in zip(row.items(), cols, strict=True)
            }
        else:
            if opts.diff:
                old = {S.avro_name(c.name): before[c.name][i] for c in cols}
                datum["before"] = old if oxs[i] and ops[i] != CHANGE_SNAPSHOT else None
            datum["after"] = None if erased else row
        hlc = f"{tss[i]}.{lgs[i]:010d}"
        if opts.updated:
            datum["updated"] = hlc
        if opts.mvcc_timestamp:
            datum["mvcc_timestamp"] = hlc
        out.append((key, write(S.schema_json(value_text), datum)))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_columnwise_equals_fastavro_random(tmp_path: Path, seed: int) -> None:
    """Random rows over every supported type (nulls, deletes, snapshots, old rows) under every
    envelope: the column-wise writer's bytes equal fastavro's, datum by datum."""
    import random

    rnd = random.Random(seed)
    g = _types_golden()
    cases = g["cases"]
    cols = ", ".join(f"{c['column']} {c['sql']}" for c in cases)
    table = make_table(
        tmp_path,
        *g.get("setup", []),
        f"CREATE TABLE types (k INT PRIMARY KEY, x INT8, y FLOAT8, z STRING, {cols})",
    )

    def values() -> dict[str, Any]:
        row: dict[str, Any] = {
            "x": rnd.choice([0, -1, 63, -64, 64, 2**40, -(2**63), 2**63 - 1, rnd.randrange(-(2**62), 2**62)]),
            "y": rnd.choice([0.0, -0.0, 1e-300, -2.5, float("inf"), rnd.random()]),
            "z": rnd.choice(["", "é", "x" * rnd.randrange(200), "🍦" * 40]),
        }
        row.update({c["column"]: c["value"] for c in cases})
        return {k: v for k, v in row.items() if rnd.random() < 0.7}

    rows = []
    for seq in range(1, 300):
        op = rnd.choice([CHANGE_UPSERT, CHANGE_UPSERT, CHANGE_ERASE, CHANGE_SNAPSHOT])
        old = values() if rnd.random() < 0.6 else None
        ts, lg = rnd.randrange(1, 2**62), rnd.randrange(0, 2**31)
        k = rnd.randrange(-(2**63), 2**63)
        rows.append(change_row(table, seq, {"k": k, **values()}, op=op, old=old, ts=ts, lg=lg))
    batch = rows_to_batch(table, rows)
    variants: list[dict[str, Any]] = [
        {"updated": True, "diff": True, "mvcc_timestamp": True},
        {},
        {"envelope": "bare", "updated": True},
        {"envelope": "key_only"},
    ]
    for opts in variants:
        resolver = MemoryResolver()
        feed = feed_of(table, 4, **opts)
        got = CrdbAvroEncoder(resolver).encode_python(batch, table, feed)
        want = _reference(batch, table, feed, resolver)
        assert [(k, v) for _, k, v, _ in got] == want, opts
        assert [p for p, *_ in got] == [partition_of(k, 4) for k, _ in want]
