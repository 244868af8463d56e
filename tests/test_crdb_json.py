"""CockroachDB JSON encoder (format ``crdb-json``): CockroachDB's own encoder test expectations,
every SQL type's rendering, and the Spark face agreeing byte for byte with the Python face."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT, read_changes, rows_to_batch
from changefeed.engine.clock import CommitTs
from changefeed.engine.storage import CHANGE_ERASE, CHANGE_UPSERT
from changefeed.engine.types import Kind, SqlType
from changefeed.feeds.crdb_options import parse_crdb_options
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.formats import crdb_values as CV, get_encoder

ENC = get_encoder("crdb-json")


def feed_for(table: TableSchema, **raw: str | None) -> FeedSpec:
    opts = parse_crdb_options(raw, sink_scheme=None)
    return FeedSpec(
        id=1,
        table_id=table.id,
        name="crdb",
        kind="crdb",
        topic=table.short_name,
        partitions=1,
        format="crdb-json",
        mode=Mode.NEW_AND_OLD_IMAGES,
        crdb=opts,
    )


def make_table(tmp_path: Path, create: str, name: str) -> TableSchema:
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    try:
        conn.execute(create)
        conn.db.refresh_catalog()
        schema = conn.db.find_table(name)
        assert schema is not None
        return schema
    finally:
        conn.close()


def ab_batch(table: TableSchema) -> pa.RecordBatch:
    """CockroachDB's TestEncoders rows: (1, 'bar') inserted then deleted at WallTime=1 Logical=2."""
    assert table.column("a").is_key
    insert = (1, 1, 2, 7, CHANGE_UPSERT, 0, 0, 1, "bar", 1, None)
    delete = (2, 1, 2, 8, CHANGE_ERASE, 1, 0, 1, None, 1, "bar")
    return rows_to_batch(table, [insert, delete])


# CockroachDB's encoder_test.go TestEncoders, verbatim (key -> value).
TEST_ENCODERS: list[tuple[dict[str, str | None], list[str]]] = [
    ({}, ['[1]->{"after": {"a": 1, "b": "bar"}}', '[1]->{"after": null}']),
    (
        {"updated": None},
        [
            '[1]->{"after": {"a": 1, "b": "bar"}, "updated": "1.0000000002"}',
            '[1]->{"after": null, "updated": "1.0000000002"}',
        ],
    ),
    (
        {"diff": None},
        [
            '[1]->{"after": {"a": 1, "b": "bar"}, "before": null}',
            '[1]->{"after": null, "before": {"a": 1, "b": "bar"}}',
        ],
    ),
    (
        {"updated": None, "diff": None},
        [
            '[1]->{"after": {"a": 1, "b": "bar"}, "before": null, "updated": "1.0000000002"}',
            '[1]->{"after": null, "before": {"a": 1, "b": "bar"}, "updated": "1.0000000002"}',
        ],
    ),
    ({"envelope": "row"}, ['[1]->{"a": 1, "b": "bar"}', "[1]->"]),
    (
        {"envelope": "row", "updated": None},
        ['[1]->{"__crdb__": {"updated": "1.0000000002"}, "a": 1, "b": "bar"}', "[1]->"],
    ),
    ({"envelope": "key_only"}, ["[1]->", "[1]->"]),
    (
        {"key_in_value": None, "topic_in_value": None},
        [
            '[1]->{"after": {"a": 1, "b": "bar"}, "key": [1], "topic": "foo"}',
            '[1]->{"after": null, "key": [1], "topic": "foo"}',
        ],
    ),
    (
        {"mvcc_timestamp": None, "updated": None},
        [
            '[1]->{"after": {"a": 1, "b": "bar"}, "mvcc_timestamp": "1.0000000002", "updated": "1.0000000002"}',
            '[1]->{"after": null, "mvcc_timestamp": "1.0000000002", "updated": "1.0000000002"}',
        ],
    ),
    (
        {"envelope": "bare", "updated": None},
        [
            '[1]->{"__crdb__": {"updated": "1.0000000002"}, "a": 1, "b": "bar"}',
            '[1]->{"__crdb__": {"updated": "1.0000000002"}, "a": 1, "b": null}',
        ],
    ),
]

RESOLVED = {"wrapped": b'{"resolved":"1.0000000002"}', "row": b'{"__crdb__":{"resolved":"1.0000000002"}}'}


@pytest.fixture(scope="module")
def foo(tmp_path_factory: pytest.TempPathFactory) -> TableSchema:
    return make_table(
        tmp_path_factory.mktemp("foo"),
        "CREATE TABLE foo (a INT PRIMARY KEY, b STRING) WITH (CHANGES = TRUE)",
        "foo",
    )


@pytest.mark.parametrize(("raw", "expected"), TEST_ENCODERS, ids=[str(r) for r, _ in TEST_ENCODERS])
def test_cockroachdb_encoder_expectations(
    foo: TableSchema, raw: dict[str, str | None], expected: list[str]
) -> None:
    out = ENC.encode_python(ab_batch(foo), foo, feed_for(foo, **raw))
    assert [(k or b"").decode() + "->" + v.decode() for _, k, v, _ in out] == expected
    assert [ts for *_, ts in out] == [1, 1]


def test_resolved_messages(foo: TableSchema) -> None:
    ts = CommitTs(1, 2)
    assert ENC.resolved(ts, 0, feed_for(foo)) == RESOLVED["wrapped"]
    for env in ("row", "key_only", "bare"):
        assert ENC.resolved(ts, 0, feed_for(foo, envelope=env)) == RESOLVED["row"]
    real = CommitTs(1532379887442299001, 0)
    assert ENC.resolved(real, 0, feed_for(foo)) == b'{"resolved":"1532379887442299001.0000000000"}'


def test_column_names_sort_bytewise(tmp_path: Path) -> None:
    # changefeed_test.go: columns declared (i, x, y, z, a, c, d) are emitted sorted.
    t = make_table(
        tmp_path,
        "CREATE TABLE t (i INT PRIMARY KEY, x STRING, y INT, z FLOAT, a BOOL, c INT[], d STRING) WITH (CHANGES = TRUE)",
        "t",
    )
    row = [1, 1, 0, 1, CHANGE_UPSERT, 0, 0]
    new = {"i": 1, "x": "Alice", "y": 3, "z": 0.5032135844230652, "a": True, "c": [], "d": "foo"}
    cols = t.stored
    row += [c.type.to_db(c.type.coerce(new[c.name])) for c in cols]
    row += [1 for c in cols if not c.is_key] + [None for c in cols if not c.is_key]
    out = ENC.encode_python(rows_to_batch(t, [tuple(row)]), t, feed_for(t))
    assert out[0][2] == (
        b'{"after": {"a": true, "c": [], "d": "foo", "i": 1, "x": "Alice", "y": 3, "z": 0.5032135844230652}}'
    )


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (0.5, "0.5"),
        (3.0, "3"),
        (123.0, "123"),
        (100.0, "1E+2"),
        (1200.0, "1.2E+3"),
        (1e-7, "1E-7"),
        (1e-6, "0.000001"),
        (0.5032135844230652, "0.5032135844230652"),
        (-2.5, "-2.5"),
        (0.0, "0"),
        (-0.0, "-0"),
        (1e22, "1E+22"),
        (float("nan"), '"NaN"'),
        (float("inf"), '"Infinity"'),
        (float("-inf"), '"-Infinity"'),
    ],
)
def test_float_text(x: float, text: str) -> None:
    assert CV.float_text(x) == text


def _random_doubles(seed: int) -> list[float]:
    """Random bit patterns, ordinary magnitudes, rounded values, integers and powers of ten,
    the one-digit subnormals and the branches' edges."""
    import random
    import struct

    rnd = random.Random(seed)
    xs = [struct.unpack("<d", rnd.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20_000)]
    xs += [rnd.uniform(-1e4, 1e4) for _ in range(2_000)]
    xs += [round(rnd.uniform(-1e4, 1e4), rnd.randrange(8)) for _ in range(2_000)]
    xs += [rnd.randrange(-(10**12), 10**12) * 10.0 ** rnd.randrange(-8, 12) for _ in range(2_000)]
    xs += [rnd.uniform(-1e17, 1e17) * 10.0 ** rnd.randrange(-20, 0) for _ in range(2_000)]
    xs += [s * k * 5e-324 for k in range(1, 400) for s in (1, -1)]
    xs += [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 1e21, 1e-7, 100.0, 1e7, 12345678.5]
    xs += [1.5e-4, 0.001, 9999999.0, 1e22, 2.0**53, 0.1, -1e-6, 1.2e-6, 1e-5, 123e20, 1e-3, 1e-4]
    xs += [1e10, 1e10 + 0.5, 1234567890123456.7, 9007199254740993.0, 250000.0, -0.25, 1e15, 1e16]
    return xs


def test_arrow_float_texts_equal_float_text() -> None:
    """The column-wise FLOAT rendering (Arrow's shortest text, mended where apd differs) against
    :func:`float_text`, value by value, nulls included."""
    xs: list[float | None] = [*_random_doubles(11), None]
    got = CV.arrow_float_texts(pa.array(xs, pa.float64())).to_pylist()
    bad = [(x, g) for x, g in zip(xs, got, strict=True) if g != (None if x is None else CV.float_text(x))]
    assert bad == [], bad[:10]
    rendered = CV.arrow_values(pa.array(xs, pa.float64()), SqlType(kind=Kind.FLOAT, name="FLOAT"))
    assert rendered.to_pylist() == CV.python_values(
        pa.array(xs, pa.float64()), SqlType(kind=Kind.FLOAT, name="FLOAT")
    )


@pytest.mark.parametrize(
    ("d", "text"),
    [
        ("1.50", "1.50"),
        ("400", "400"),
        ("4E+2", "4E+2"),
        ("0.0000001", "1E-7"),
        ("0.00", "0.00"),
        ("NaN", '"NaN"'),
    ],
)
def test_decimal_text(d: str, text: str) -> None:
    assert CV.decimal_text(Decimal(d)) == text


def test_string_escaping() -> None:
    assert CV.json_string('a"b\\c\n\r\t') == '"a\\"b\\\\c\\n\\r\\t"'
    assert CV.json_string("\x01\x08\x0c<>&é☃") == '"\\u0001\\u0008\\u000c<>&é☃"'


def test_interval_and_time_text() -> None:
    day = 86_400_000_000
    assert CV.interval_text(day + 4 * 3600_000_000 + 5 * 60_000_000 + 6_000_000) == '"1 day 04:05:06"'
    assert CV.interval_text(1000) == '"00:00:00.001"'
    assert CV.interval_text(3 * day) == '"3 days"'
    assert CV.interval_text(0) == '"00:00:00"'
    assert CV.interval_text(-day - 3600_000_000) == '"-1 days -01:00:00"'
    assert CV.time_text((3 * 3600 + 4 * 60 + 5) * 10**9 + 123456000) == '"03:04:05.123456"'


# ============================================================================ every type

TYPES_TABLE = """CREATE TABLE every (
  id INT PRIMARY KEY, "Upper" STRING, s STRING, i2 INT2, f FLOAT, f4 FLOAT4, d DECIMAL(10,2), dn DECIMAL,
  tz TIMESTAMPTZ, tn TIMESTAMP, dt DATE, tm TIME, iv INTERVAL, u UUID, ip INET, bs BYTES, j JSONB,
  ai INT[], sa STRING[], bt BIT(3), vb VARBIT, bo BOOL, e greeting
) WITH (CHANGES = TRUE)"""

EVERY_ROWS: list[dict[str, Any]] = [
    {
        "id": 1,
        "Upper": "Ü",
        "s": 'x"y\n\x01',
        "i2": -7,
        "f": 100.0,
        "f4": 0.5,
        "d": Decimal("1.5"),
        "dn": Decimal("0.0000001"),
        "tz": "2019-01-02 03:04:05.123456+00",
        "tn": "2019-01-02 03:04:05.5",
        "dt": "2019-01-02",
        "tm": "03:04:05.123",
        "iv": "1 day 4 hours 5 minutes 6 seconds",
        "u": "8c5b9c8e-0000-4000-8000-000000000001",
        "ip": "190.0.0.0/24",
        "bs": b"\x01\x02\xff",
        "j": '{"b": 1, "a": [1, "x", {"z": null, "c": 2.5}], "B": true}',
        "ai": [1, None, 3],
        "sa": ["a", "b"],
        "bt": "101",
        "vb": "0101",
        "bo": True,
        "e": "hi",
    },
    {"id": 2},
    {
        "id": 3,
        "f": float("nan"),
        "f4": 1200.0,
        "d": Decimal("400"),
        "dn": Decimal("4E+2"),
        "tz": "1969-12-31 23:59:59.9+00",
        "iv": "0 seconds",
        "j": "[]",
        "ai": [],
        "bo": False,
        "tm": "00:00:00",
    },
]

EVERY_EXPECTED = [
    '{"after": {"Upper": "Ü", "ai": [1, null, 3], "bo": true, "bs": "\\\\x0102ff", "bt": "101", "d": 1.50, '
    '"dn": 1E-7, "dt": "2019-01-02", "e": "hi", "f": 1E+2, "f4": 0.5, "i2": -7, "id": 1, "ip": "190.0.0.0/24", '
    '"iv": "1 day 04:05:06", "j": {"B": true, "a": [1, "x", {"c": 2.5, "z": null}], "b": 1}, '
    '"s": "x\\"y\\n\\u0001", "sa": ["a", "b"], "tm": "03:04:05.123", "tn": "2019-01-02T03:04:05.5", '
    '"tz": "2019-01-02T03:04:05.123456Z", "u": "8c5b9c8e-0000-4000-8000-000000000001", "vb": "0101"}}',
    '{"after": {"Upper": null, "ai": null, "bo": null, "bs": null, "bt": null, "d": null, "dn": null, '
    '"dt": null, "e": null, "f": null, "f4": null, "i2": null, "id": 2, "ip": null, "iv": null, "j": null, '
    '"s": null, "sa": null, "tm": null, "tn": null, "tz": null, "u": null, "vb": null}}',
    '{"after": {"Upper": null, "ai": [], "bo": false, "bs": null, "bt": null, "d": 400.00, "dn": 4E+2, '
    '"dt": null, "e": null, "f": "NaN", "f4": 1.2E+3, "i2": null, "id": 3, "ip": null, "iv": "00:00:00", '
    '"j": [], "s": null, "sa": null, "tm": "00:00:00", "tn": null, "tz": "1969-12-31T23:59:59.9Z", "u": null, '
    '"vb": null}}',
]


def every_batch(tmp_path: Path) -> tuple[TableSchema, pa.RecordBatch]:
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    try:
        conn.execute("CREATE TYPE greeting AS ENUM ('hi', 'bye')")
        conn.execute(TYPES_TABLE)
        conn.db.refresh_catalog()
        table = conn.db.find_table("every")
        assert table is not None
        rows = []
        for i, spec in enumerate(EVERY_ROWS):
            row: list[Any] = [i + 1, 1_000 + i, i, 10 + i, CHANGE_SNAPSHOT if i == 2 else CHANGE_UPSERT, 0, 0]
            row += [
                c.type.to_db(c.type.coerce(spec.get(c.name))) if spec.get(c.name) is not None else None
                for c in table.stored
            ]
            row += [1 for c in table.stored if not c.is_key] + [None for c in table.stored if not c.is_key]
            rows.append(tuple(row))
        return table, rows_to_batch(table, rows)
    finally:
        conn.close()


def test_every_type_python(tmp_path: Path) -> None:
    table, batch = every_batch(tmp_path)
    out = ENC.encode_python(batch, table, feed_for(table))
    assert [k for _, k, _, _ in out] == [b"[1]", b"[2]", b"[3]"]
    assert [v.decode() for _, _, v, _ in out] == EVERY_EXPECTED


def test_real_engine_transaction_nets_writes(tmp_path: Path) -> None:
    conn = changefeed.connect(str(tmp_path / "db"), dialect="sql")
    conn.execute("CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING) WITH (CHANGES = TRUE)")
    with conn.transaction():
        conn.execute("INSERT INTO office_dogs VALUES (1, 'Carl')")
        conn.execute("UPDATE office_dogs SET name = 'Petee' WHERE id = 1")
    conn.execute("DELETE FROM office_dogs WHERE name = 'Petee'")
    conn.db.refresh_catalog()
    table = conn.db.find_table("office_dogs")
    assert table is not None
    batch = read_changes(conn.db.conn, table, 0, 10**18)
    conn.close()
    out = ENC.encode_python(batch, table, feed_for(table))
    assert [(k, v) for _, k, v, _ in out] == [
        (b"[1]", b'{"after": {"id": 1, "name": "Petee"}}'),
        (b"[1]", b'{"after": null}'),
    ]


# ============================================================================ Spark face


@pytest.mark.spark
def test_spark_face_equals_python(spark: Any, tmp_path: Path) -> None:
    table, batch = every_batch(tmp_path)
    # the enriched envelope's processing time (ts_ns): one for both faces
    batch = batch.append_column("pt", pa.array([1_746_045_115_679_811_000] * batch.num_rows, pa.int64()))
    arrow = pa.Table.from_batches([batch])
    df = spark.createDataFrame(arrow)
    for raw in (
        {},
        {"updated": None, "diff": None, "mvcc_timestamp": None, "key_in_value": None, "topic_in_value": None},
        {"envelope": "row", "updated": None},
        {"envelope": "bare", "updated": None},
        {"envelope": "key_only"},
        {"envelope": "enriched"},
        {"envelope": "enriched", "enriched_properties": "source", "updated": None, "mvcc_timestamp": None},
        {"envelope": "enriched", "enriched_properties": "source,schema", "diff": None, "key_in_value": None},
    ):
        feed = feed_for(table, **raw)
        py = ENC.encode_python(batch, table, feed)
        sp = [
            (r["partition"], bytes(r["key"]), bytes(r["value"]), r["ts"])
            for r in ENC.encode_spark(df, table, feed).collect()
        ]
        assert sp == py, raw


@pytest.mark.spark
def test_spark_float_text_equals_python(spark: Any) -> None:
    """The Spark FLOAT rendering (shortest text taken apart with string functions) against
    :func:`float_text` over random bit patterns, every branch and the one-digit subnormals."""
    from pyspark.sql import functions as F

    xs = _random_doubles(7)
    df = spark.createDataFrame(pa.table({"i": list(range(len(xs))), "d": pa.array(xs, pa.float64())}))
    text = CV.float_text_column("d")
    float_type = SqlType(kind=Kind.FLOAT, name="FLOAT")
    rendered = CV.spark_value(F.col("d"), float_type, float_text=F.col(text)).alias("s")
    got = {r["i"]: r["s"] for r in CV.with_float_texts(df, ["d"]).select("i", rendered).toArrow().to_pylist()}
    bad = [(x, CV.float_text(x), got[i]) for i, x in enumerate(xs) if got[i] != CV.float_text(x)]
    assert bad == [], bad[:10]


@pytest.mark.spark
def test_spark_json_string_equals_python(spark: Any) -> None:
    """Go-style string escaping on Spark against :func:`json_string`: every ASCII character,
    backslashes before escapes, non-ASCII text and NULL."""
    import random

    from pyspark.sql import functions as F

    rnd = random.Random(11)
    texts: list[str | None] = [chr(i) for i in range(128)] + [
        None,
        "",
        "plain",
        "\\u0001",
        '\\"',
        "é€😀\u2028",
    ]
    alphabet = [chr(i) for i in range(40)] + ["\\", '"', "a", "é", "😀"]
    texts += ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 12))) for _ in range(500)]
    df = spark.createDataFrame(pa.table({"i": list(range(len(texts))), "s": pa.array(texts, pa.string())}))
    got = {
        r["i"]: r["j"]
        for r in df.select("i", CV.spark_json_string(F.col("s")).alias("j")).toArrow().to_pylist()
    }
    bad = [(t, got[i]) for i, t in enumerate(texts) if got[i] != (None if t is None else CV.json_string(t))]
    assert bad == [], bad[:10]
