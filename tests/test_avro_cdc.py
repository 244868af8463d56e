"""CockroachDB Avro with CDC queries (``CREATE CHANGEFEED .. WITH format = avro AS SELECT ..``) and
with the ``enriched`` envelope: the registered schemas (golden files), the records as Confluent's
``AvroDeserializer`` reads them through our schema registry, CockroachDB's refusals, the Spark face
equal to the Python face byte for byte, and a CDC-query job and an enriched job on Spark.

``CHANGEFEED_REGEN_GOLDEN=1`` rewrites tests/golden/avro/{query,enriched}_schemas.json from the
encoder (review the diff)."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import confluent_kafka.schema_registry as sr
import confluent_kafka.schema_registry.avro as avro_sr
import confluent_kafka.serialization as serialization
import httpx
import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT, rows_to_batch
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.exceptions import ChangefeedError
from changefeed.feeds.crdb_options import parse_crdb_options
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.formats.crdb_avro import CrdbAvroEncoder
from changefeed.formats.schema_registry import MemoryResolver
from changefeed.server.registry import BackgroundRegistry
from changefeed.sql.cdc_check import check_query
from changefeed.sql.cdc_parse import parse_query
from tests.test_avro import change_row, make_table

GOLDEN = Path(__file__).parent / "golden" / "avro"
REGEN = os.environ.get("CHANGEFEED_REGEN_GOLDEN") == "1"
CLUSTER = "c0ffee00-0000-4000-8000-000000000000"

USERS = (
    "CREATE TABLE users (id INT PRIMARY KEY, name STRING, city STRING NOT NULL, score DECIMAL(10,2),"
    " f FLOAT, born DATE, seen TIMESTAMPTZ, tags JSONB)"
)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with BackgroundRegistry(tmp_path_factory.mktemp("registry")) as url:
        yield url


def confluent_decode(registry: str, topic: str, key: bytes, value: bytes | None) -> tuple[Any, Any]:
    client = sr.SchemaRegistryClient({"url": registry})
    de = avro_sr.AvroDeserializer(client)
    ctx_k = serialization.SerializationContext(topic, serialization.MessageField.KEY)
    ctx_v = serialization.SerializationContext(topic, serialization.MessageField.VALUE)
    return de(key, ctx_k), (de(value, ctx_v) if value else None)


def _take(feed: Any, n: int, timeout_s: float = 20.0) -> list[tuple[Any, bytes, bytes]]:
    """The next ``n`` row messages of a running core changefeed (resolved messages skipped)."""
    out: list[tuple[Any, bytes, bytes]] = []
    done = threading.Event()

    def pump() -> None:
        for t, k, v in feed:
            if t is None:
                continue
            out.append((t, k, v))
            if len(out) >= n:
                break
        done.set()

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    assert done.wait(timeout_s), f"got {len(out)} of {n} messages"
    return out


def _stream(conn: changefeed.Connection, registry: str, opts: str, query: str) -> Any:
    return conn.stream(
        f"CREATE CHANGEFEED WITH format = avro, confluent_schema_registry = '{registry}', {opts} AS {query}"
    )


# ============================================================================ CDC queries, sinkless


def test_query_bare_through_confluent(tmp_path: Path, registry: str) -> None:
    """The default bare envelope: ``record`` holds the projection, typed; the predicate drops rows;
    a delete carries its key and the outputs computed over NULL columns."""
    conn = changefeed.connect(tmp_path / "db")
    try:
        conn.execute(USERS)
        conn.execute(
            "INSERT INTO users VALUES (1, 'ann', 'rome', 12.5, 1.5, '2001-02-03', '2020-01-02 03:04:05+00',"
            ' \'{"b": 1, "a": [true]}\')'
        )
        conn.execute("INSERT INTO users (id, name, city) VALUES (2, 'bob', 'oslo')")
        q = (
            "SELECT id, upper(name) AS who, score::DECIMAL(12,3) AS s, f * 2 AS f2, born, seen,"
            " tags->'a' AS ta, length(city) AS n, city = 'rome' AS roman, event_op() AS op"
            " FROM users WHERE city != 'oslo' OR event_op() = 'delete'"
        )
        with _stream(conn, registry, "initial_scan = 'yes'", q) as feed:
            first = _take(feed, 1)
            conn.execute("UPDATE users SET name = 'anna' WHERE id = 1")
            conn.execute("DELETE FROM users WHERE id = 2")
            rest = _take(feed, 2)
    finally:
        conn.close()
    got = [confluent_decode(registry, "users", k, v) for _, k, v in first + rest]
    seen = datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert got == [
        (
            {"id": 1},
            {
                "record": {
                    "id": 1, "who": "ANN", "s": Decimal("12.500"), "f2": 3.0, "born": date(2001, 2, 3),
                    "seen": seen, "ta": "[true]", "n": 4, "roman": True, "op": "upsert",
                }
            },
        ),
        (
            {"id": 1},
            {
                "record": {
                    "id": 1, "who": "ANNA", "s": Decimal("12.500"), "f2": 3.0, "born": date(2001, 2, 3),
                    "seen": seen, "ta": "[true]", "n": 4, "roman": True, "op": "upsert",
                }
            },
        ),
        (
            {"id": 2},
            {
                "record": {
                    "id": 2, "who": None, "s": None, "f2": None, "born": None, "seen": None, "ta": None,
                    "n": None, "roman": None, "op": "delete",
                }
            },
        ),
    ]  # fmt: skip
    subjects = httpx.get(f"{registry}/subjects").json()
    assert "users-key" in subjects and "users-value" in subjects


def test_query_wrapped_diff_cdc_prev(tmp_path: Path, registry: str) -> None:
    """wrapped + diff: ``before`` is the whole previous row (``users_before``), ``after`` the
    projection, null for a delete; ``cdc_prev`` fields and ``event_op()`` as CockroachDB's."""
    conn = changefeed.connect(tmp_path / "db")
    try:
        conn.execute("CREATE TABLE acc (id INT PRIMARY KEY, name STRING, bal INT)")
        q = "SELECT name, (cdc_prev).bal AS was, bal - (cdc_prev).bal AS delta, event_op() AS op FROM acc"
        with _stream(
            conn,
            registry,
            "no_initial_scan, envelope = 'wrapped', diff, updated, avro_schema_prefix = 'q_'",
            q,
        ) as feed:
            conn.execute("INSERT INTO acc VALUES (1, 'a', 10)")
            conn.execute("UPDATE acc SET bal = 15 WHERE id = 1")
            conn.execute("DELETE FROM acc WHERE id = 1")
            got = _take(feed, 3)
    finally:
        conn.close()
    decoded = [confluent_decode(registry, "q_acc", k, v) for _, k, v in got]
    assert [k for k, _ in decoded] == [{"id": 1}] * 3
    values = [v for _, v in decoded]
    assert all(isinstance(v.pop("updated"), str) for v in values)
    assert values == [
        {"before": None, "after": {"name": "a", "was": None, "delta": None, "op": "insert"}},
        {"before": {"id": 1, "name": "a", "bal": 10}, "after": {"name": "a", "was": 10, "delta": 5, "op": "update"}},
        {"before": {"id": 1, "name": "a", "bal": 15}, "after": None},
    ]  # fmt: skip
    assert {"q_acc-key", "q_acc-value"} <= set(httpx.get(f"{registry}/subjects").json())


def _query_feed(table: TableSchema, text: str, **raw: str | None) -> FeedSpec:
    opts = parse_crdb_options(
        {"format": "avro", "confluent_schema_registry": "http://r", **raw}, sink_scheme="topics", query=True
    )
    return FeedSpec(
        id=1,
        table_id=table.id,
        name="x",
        kind="crdb",
        topic=table.short_name,
        partitions=2,
        format="crdb-avro",
        mode=Mode.NEW_AND_OLD_IMAGES,
        crdb=opts,
        query=check_query(parse_query(text), table, cluster_id=CLUSTER),
    )


@pytest.mark.parametrize(
    ("query", "raw", "error"),
    [
        (
            "SELECT id, crdb_internal_mvcc_timestamp FROM t",
            {},
            "column crdb_internal_mvcc_timestamp: decimal with no precision not yet supported with avro",
        ),
        (
            "SELECT id, n / 2 AS half FROM t",
            {},
            "column half: decimal with no precision not yet supported with avro",
        ),
        ("SELECT id, d FROM t", {}, "column d: decimal with no precision not yet supported with avro"),
        ("SELECT cdc_prev FROM t", {}, "column cdc_prev: type RECORD not yet supported with avro"),
        # CockroachDB types DECIMAL arithmetic and functions as DECIMAL without precision
        ("SELECT e + 1 AS e1 FROM t", {}, "column e1: decimal with no precision not yet supported with avro"),
        (
            "SELECT round(e, 1) FROM t",
            {},
            "column round: decimal with no precision not yet supported with avro",
        ),
    ],
)
def test_query_outputs_refused(tmp_path: Path, query: str, raw: dict[str, str], error: str) -> None:
    """What CockroachDB's Avro encoder refuses in a projection, with its text."""
    table = make_table(tmp_path, "CREATE TABLE t (id INT PRIMARY KEY, n INT, d DECIMAL, e DECIMAL(10,2))")
    feed = _query_feed(table, query, **raw)
    batch = rows_to_batch(table, [change_row(table, 1, {"id": 1, "n": 2})])
    with pytest.raises(ChangefeedError, match="^" + re.escape(error) + "$"):
        CrdbAvroEncoder(MemoryResolver()).encode_python(batch, table, feed)


@pytest.mark.parametrize(
    ("stmt", "error"),
    [
        (
            "CREATE CHANGEFEED WITH format = avro, confluent_schema_registry = 'http://127.0.0.1:1', diff"
            " AS SELECT id FROM t",
            "diff is only usable with envelope=wrapped",
        ),
        (
            "CREATE CHANGEFEED WITH format = avro, confluent_schema_registry = 'http://127.0.0.1:1',"
            " envelope = 'enriched' AS SELECT id FROM t",
            "envelope=enriched is incompatible with SELECT statement",
        ),
        (
            "CREATE CHANGEFEED WITH format = avro, confluent_schema_registry = 'http://127.0.0.1:1', updated"
            " AS SELECT id FROM t",
            "updated is only usable with envelope=wrapped",
        ),
        (
            "CREATE CHANGEFEED WITH format = avro, key_in_value, envelope = 'wrapped',"
            " confluent_schema_registry = 'http://127.0.0.1:1' AS SELECT id FROM t",
            "key_in_value is not supported with format=avro",
        ),
    ],
)
def test_query_option_refusals(tmp_path: Path, stmt: str, error: str) -> None:
    conn = changefeed.connect(tmp_path / "db")
    try:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        with pytest.raises(ChangefeedError, match=error), conn.stream(stmt) as feed:
            next(iter(feed))
    finally:
        conn.close()


# ============================================================================ golden schemas


def _schemas(resolver: MemoryResolver) -> dict[str, list[Any]]:
    by_id = {sid: json.loads(text) for text, sid in resolver._ids.items()}
    return {subject: [by_id[i] for i in ids] for subject, ids in sorted(resolver.subjects.items())}


def _golden(name: str, got: Any) -> None:
    path = GOLDEN / name
    if REGEN:
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    assert got == json.loads(path.read_text())


def test_query_schemas_golden(tmp_path: Path) -> None:
    table = make_table(
        tmp_path,
        "CREATE TABLE t (id INT PRIMARY KEY, n INT, s STRING, d DECIMAL(8,2), ts TIMESTAMP, b BYTES)",
    )
    batch = rows_to_batch(table, [change_row(table, 1, {"id": 1, "n": 2, "s": "x"})])
    got: dict[str, Any] = {}
    for label, text, raw in [
        ("bare", "SELECT id, n + 1, upper(s) AS u, d, ts::DATE AS day, b, s = 'x' AS is_x FROM t", {}),
        (
            "wrapped_diff",
            'SELECT n AS "☃ n", (cdc_prev).s AS old_s FROM t',
            {"envelope": "wrapped", "diff": None},
        ),
        (
            "prefix_key_only",
            "SELECT n FROM t WHERE n > 1",
            {"envelope": "key_only", "avro_schema_prefix": "p_"},
        ),
    ]:
        resolver = MemoryResolver()
        CrdbAvroEncoder(resolver).encode_python(batch, table, _query_feed(table, text, **raw))
        got[label] = {"query": text, "options": raw, "subjects": _schemas(resolver)}
    _golden("query_schemas.json", got)


def _enriched_feed(table: TableSchema, sink: str | None = "topics", **raw: str | None) -> FeedSpec:
    opts = parse_crdb_options(
        {"format": "avro", "confluent_schema_registry": "http://r", "envelope": "enriched", **raw},
        sink_scheme=sink,
    )
    return FeedSpec(
        id=1,
        table_id=table.id,
        name="x",
        kind="crdb",
        topic=table.short_name,
        partitions=2,
        format="crdb-avro",
        mode=Mode.NEW_AND_OLD_IMAGES,
        crdb=replace(opts, job_id=42, cluster_id=CLUSTER),
    )


def test_enriched_schemas_golden(tmp_path: Path) -> None:
    table = make_table(tmp_path, "CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    batch = rows_to_batch(table, [change_row(table, 1, {"id": 1, "s": "x"})])
    got: dict[str, Any] = {}
    for label, raw in [
        ("plain", {}),
        ("source_diff_updated_mvcc", {"enriched_properties": "source", "diff": None, "updated": None, "mvcc_timestamp": None}),
        ("source_schema_prefix", {"enriched_properties": "source,schema", "avro_schema_prefix": "p_"}),
    ]:  # fmt: skip
        resolver = MemoryResolver()
        CrdbAvroEncoder(resolver).encode_python(batch, table, _enriched_feed(table, **raw))
        got[label] = {"options": raw, "subjects": _schemas(resolver)}
    _golden("enriched_schemas.json", got)


# ============================================================================ enriched


def test_enriched_sinkless_through_confluent(tmp_path: Path, registry: str) -> None:
    """``op`` c/u/d, ``ts_ns`` processing time, ``before`` with diff, the ``source`` record with
    the commit time (updated) and the MVCC time (mvcc_timestamp); the key is the key record."""
    conn = changefeed.connect(tmp_path / "db")
    try:
        conn.execute("CREATE TABLE en (id INT PRIMARY KEY, s STRING)")
        conn.execute("INSERT INTO en VALUES (1, 'a')")
        stmt = (
            f"CREATE CHANGEFEED FOR en WITH format = avro, confluent_schema_registry = '{registry}',"
            " envelope = 'enriched', enriched_properties = 'source', diff, updated, mvcc_timestamp"
        )
        with conn.stream(stmt) as feed:
            scan = _take(feed, 1)
            conn.execute("UPDATE en SET s = 'b' WHERE id = 1")
            conn.execute("DELETE FROM en WHERE id = 1")
            rest = _take(feed, 2)
    finally:
        conn.close()
    decoded = [confluent_decode(registry, "en", k, v) for _, k, v in scan + rest]
    assert [k for k, _ in decoded] == [{"id": 1}] * 3
    values = [v for _, v in decoded]
    assert [(v["op"], v["before"], v["after"]) for v in values] == [
        ("c", None, {"id": 1, "s": "a"}),
        ("u", {"id": 1, "s": "a"}, {"id": 1, "s": "b"}),
        ("d", {"id": 1, "s": "b"}, None),
    ]
    for v in values:
        src = v["source"]
        assert src["mvcc_timestamp"] == src["ts_hlc"]
        wall, _, logical = src["ts_hlc"].partition(".")
        assert int(wall) == src["ts_ns"] and len(logical) == 10
        assert abs(v["ts_ns"] - src["ts_ns"]) < 600 * 10**9  # processing time, near the commit
        assert {k: src[k] for k in src if k not in ("mvcc_timestamp", "ts_hlc", "ts_ns", "cluster_id", "db_version")} == {
            "changefeed_sink": "sinkless buffer", "cluster_name": "", "database_name": "defaultdb",
            "job_id": "0", "node_id": "1", "node_name": "localhost", "origin": "cockroachdb",
            "primary_keys": ["id"], "schema_name": "public", "source_node_locality": "", "table_name": "en",
        }  # fmt: skip
    assert list(values[0]) == ["before", "after", "source", "ts_ns", "op"]


def test_enriched_without_source(tmp_path: Path) -> None:
    """Without enriched_properties=source: after, ts_ns, op (updated/mvcc_timestamp live in the
    source record only, so they add nothing here)."""
    import io

    import fastavro

    table = make_table(tmp_path, "CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    rows = [
        change_row(table, 1, {"id": 1, "s": "a"}, op=CHANGE_SNAPSHOT),
        change_row(table, 2, {"id": 1, "s": "b"}, old={"s": "a"}),
        change_row(table, 3, {"id": 1}, op=CHANGE_ERASE, old={"s": "b"}),
    ]
    batch = rows_to_batch(table, rows)
    batch = batch.append_column("pt", pa.array([7, 8, 9], pa.int64()))
    resolver = MemoryResolver()
    out = CrdbAvroEncoder(resolver).encode_python(
        batch, table, _enriched_feed(table, sink=None, updated=None)
    )
    schemas = {sid: fastavro.parse_schema(json.loads(text)) for text, sid in resolver._ids.items()}
    values = [
        fastavro.schemaless_reader(io.BytesIO(v[5:]), schemas[int.from_bytes(v[1:5], "big")], None)
        for _, _, v, _ in out
    ]
    assert values == [
        {"after": {"id": 1, "s": "a"}, "ts_ns": 7, "op": "c"},
        {"after": {"id": 1, "s": "b"}, "ts_ns": 8, "op": "u"},
        {"after": None, "ts_ns": 9, "op": "d"},
    ]


def test_enriched_refusals(tmp_path: Path) -> None:
    """The sinks CockroachDB refuses the enriched envelope on stay refused with Avro too."""
    from changefeed.exceptions import InvalidOption

    base = {"format": "avro", "confluent_schema_registry": "http://r", "envelope": "enriched"}
    # the registry is a Kafka sink option: CockroachDB's sink check refuses it before the envelope
    with pytest.raises(
        InvalidOption, match="this sink is incompatible with option confluent_schema_registry"
    ):
        parse_crdb_options(base, sink_scheme="nodelocal")
    with pytest.raises(InvalidOption, match="this sink is incompatible with envelope=enriched"):
        parse_crdb_options({"envelope": "enriched"}, sink_scheme="nodelocal")
    with pytest.raises(InvalidOption, match="key_in_value is not supported with format=avro"):
        parse_crdb_options({**base, "key_in_value": None}, sink_scheme="kafka")
    assert parse_crdb_options(base, sink_scheme="kafka").envelope == "enriched"


# ============================================================================ Spark


QUERIES = [
    "SELECT * FROM v",
    "SELECT city, n * 2 + 1 AS m, n // 3 AS fl, f::string AS fs, f * 2 AS f2, dd, (cdc_prev).dd AS pdd,"
    " dd::decimal(12,4) AS dd4, ts, tz, dt, iv, j, b, bb, upper(city) AS u FROM v WHERE n > -500",
    "SELECT id, event_op() AS op, (cdc_prev).n AS was, jsonb_build_object('c', city, 'n', n) AS o,"
    " date_trunc('hour', tz) AS h, dt + 1 AS tomorrow FROM v WHERE event_op() != 'upsert'",
]


def _faces_table(tmp_path: Path) -> tuple[TableSchema, pa.RecordBatch]:
    """Inserts, updates and deletes over most types (no DECIMAL without precision: Avro refuses
    it, so `SELECT *` and `before` could not carry it)."""
    import random

    from changefeed.engine.changes import read_changes

    conn = changefeed.connect(tmp_path / "faces")
    conn.execute(
        "CREATE TABLE v (id UUID NOT NULL, city STRING NOT NULL, type STRING, n INT, f FLOAT, dd DECIMAL(10,2),"
        " ts TIMESTAMP, tz TIMESTAMPTZ, dt DATE, iv INTERVAL, j JSONB, b BOOL, bb BYTES, PRIMARY KEY (city, id))"
    )
    rng = random.Random(1)
    sql = "UPSERT INTO v (id, city, type, n, f, dd, ts, tz, dt, iv, j, b, bb) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    for i in range(30):
        conn.execute(
            sql,
            (
                f"{i:08x}-9999-4800-8000-000000000009",
                rng.choice(["la", "ny", "sf"]),
                rng.choice(["bike", "scooter", None]),
                rng.randint(-1000, 1000),
                rng.choice([1.5, 0.1, 1e20, -3.25, 1e-7, None]),
                rng.choice(["1.50", "22.30", "-0.01", None]),
                "2019-01-02 03:04:05.5",
                "2020-02-03 04:05:06+00",
                "2021-03-04",
                "26h3m4s",
                rng.choice(['{"a": 1, "b": [1,2]}', '{"color": "red"}', None]),
                rng.choice([True, False, None]),
                b"\x01\x02",
            ),
        )
    for i in range(0, 30, 3):
        conn.execute(f"DELETE FROM v WHERE id = '{i:08x}-9999-4800-8000-000000000009'")
    for i in range(1, 30, 4):
        conn.execute(f"UPDATE v SET n = n + 1, type = 'car' WHERE id = '{i:08x}-9999-4800-8000-000000000009'")
    db = conn.session.db
    db.refresh_catalog()
    table = db.find_table("v")
    assert table is not None
    batch = read_changes(db.conn, table, 0, 1 << 62)
    conn.close()
    return table, batch


@pytest.mark.spark
def test_spark_face_equals_python_face(spark: Any, tmp_path: Path) -> None:
    """CDC queries (bare, wrapped with diff) and the enriched envelope: both faces, byte for byte."""
    table, batch = _faces_table(tmp_path)
    batch = batch.append_column("pt", pa.repeat(pa.scalar(123, pa.int64()), batch.num_rows))
    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    enc = CrdbAvroEncoder(MemoryResolver())
    feeds: list[tuple[str, FeedSpec]] = []
    for q in QUERIES:
        for raw in ({}, {"envelope": "wrapped", "diff": None, "updated": None, "mvcc_timestamp": None}):
            feeds.append((f"{q[:30]} {raw}", _query_feed(table, q, **raw)))
    feeds.append(
        (
            "enriched",
            _enriched_feed(table, enriched_properties="source", diff=None, updated=None, mvcc_timestamp=None),
        )
    )
    feeds.append(("enriched plain", _enriched_feed(table)))
    bad = []
    for label, feed in feeds:
        py = sorted(enc.encode_python(batch, table, feed))
        sp = sorted(
            (r["partition"], bytes(r["key"]), bytes(r["value"]), r["ts"])
            for r in enc.encode_spark(df, table, feed).collect()
        )
        assert py, label
        if sp != py:
            bad.append(
                (label, next(((a, b) for a, b in zip(py, sp, strict=False) if a != b), (len(py), len(sp))))
            )
    assert bad == []


@pytest.mark.spark
def test_query_and_enriched_jobs_on_spark(
    tmp_path: Path, spark: Any, registry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CDC-query job and an enriched job into the embedded topics, encoded on Spark (the
    runner's driver shortcut for small batches and scans turned off): Confluent's deserializer
    reads every record."""
    from changefeed.pipeline.runner import run_until_idle
    from changefeed.pipeline.snapshot import scan
    from changefeed.pipeline.stream import query as job
    from changefeed.testing.validators import read_topic

    monkeypatch.setattr(job, "DRIVER_ENCODE_ROWS", 0)
    monkeypatch.setattr(scan, "DRIVER_SCAN_ROWS", 0)
    spark_calls: list[str] = []
    encode_spark = CrdbAvroEncoder.encode_spark

    def counted(self: CrdbAvroEncoder, df: Any, table: TableSchema, feed: FeedSpec) -> Any:
        spark_calls.append(feed.topic)
        return encode_spark(self, df, table, feed)

    monkeypatch.setattr(CrdbAvroEncoder, "encode_spark", counted)
    db = tmp_path / "db"
    conn = changefeed.connect(db)
    try:
        conn.execute("CREATE TABLE jt (a INT PRIMARY KEY, b STRING, c INT)")
        conn.execute("INSERT INTO jt VALUES (1, 'x', 10), (2, 'y', 20), (3, 'z', 30)")
        conn.execute(
            "CREATE CHANGEFEED INTO 'topics://?topic_prefix=q_' WITH format = avro,"
            f" confluent_schema_registry = '{registry}' AS SELECT a, b || '!' AS bang, c * 2 AS c2 FROM jt"
            " WHERE c >= 20"
        )
        conn.execute(
            "CREATE CHANGEFEED FOR jt INTO 'topics://?topic_prefix=e_' WITH format = avro,"
            f" confluent_schema_registry = '{registry}', envelope = 'enriched', enriched_properties = 'source'"
        )
        conn.execute("UPDATE jt SET c = 5 WHERE a = 3")
        conn.execute("DELETE FROM jt WHERE a = 2")
    finally:
        conn.close()
    run_until_idle(db, spark=spark, gc=False)
    assert {"q_jt", "e_jt"} <= set(spark_calls)
    q = sorted(
        (
            confluent_decode(registry, "q_jt", k, v)
            for _, _, k, v, _ in read_topic(db, "q_jt")
            if k is not None
        ),
        key=lambda kv: (kv[0]["a"], str(kv[1])),
    )
    # the scan's rows the predicate keeps; the update to c = 5 and the delete (whose c reads
    # NULL) do not pass `c >= 20`
    assert q == [
        ({"a": 2}, {"record": {"a": 2, "bang": "y!", "c2": 40}}),
        ({"a": 3}, {"record": {"a": 3, "bang": "z!", "c2": 60}}),
    ]
    e = [
        confluent_decode(registry, "e_jt", k, v) for _, _, k, v, _ in read_topic(db, "e_jt") if k is not None
    ]
    ops = sorted((k["a"], v["op"], v["after"] is None) for k, v in e)
    assert ops == [(1, "c", False), (2, "c", False), (2, "d", True), (3, "c", False), (3, "u", False)]
    src = e[0][1]["source"]
    assert (src["changefeed_sink"], src["table_name"], src["primary_keys"]) == ("kafka", "jt", ["a"])
    assert src["job_id"] != "0" and src["ts_ns"] is None
