"""CDC queries on Spark: the Spark column face equals the Python face byte for byte over every
type and many functions; a randomized workload through a CDC-query job (predicate and projection)
equals the same filter applied to the core changefeed's output; with diff, deletes carry before."""

from __future__ import annotations

import json
import random
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.changes import read_changes
from changefeed.feeds.crdb_options import parse_crdb_options
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.formats.crdb_json import CrdbJsonEncoder
from changefeed.sql.cdc_check import check_query
from changefeed.sql.cdc_parse import parse_query
from changefeed.testing import validators as v

pytestmark = pytest.mark.spark

ENC = CrdbJsonEncoder()

QUERIES = [
    "SELECT * FROM v",
    "SELECT city, type, n * 2 + 1 AS m, n / 3 AS third, n // 3 AS fl, n % 7 AS md, f::string AS fs, f * 2 AS f2,"
    " dd + 1 AS dd1, dd * dd AS sq, du::string AS dus, du::decimal(10,4) + 1 AS du1, ts::string AS tss,"
    " tz::string AS tzs, dt::string AS dts, iv::string AS ivs, b::string AS bs, bb::string AS bys, j::string AS js"
    " FROM v",
    "SELECT id, event_op(), cdc_prev, crdb_internal_mvcc_timestamp - (cdc_prev).crdb_internal_mvcc_timestamp AS age,"
    " event_schema_timestamp()::int AS e FROM v WHERE event_op() != 'upsert'",
    "SELECT upper(city), lower(type), length(city), left(id::string, 2), right(city, 1), substring(city, 2),"
    " substr(city, 0, 2), btrim('  x  '), replace(city, 'a', 'A'), split_part(id::string, '-', 2),"
    " strpos(city, 'y'), reverse(city), repeat(city, 2), lpad(city, 5, '*'), rpad(city, 1), md5(city),"
    " concat(city, n, NULL, b), concat_ws('-', city, type, n), quote_literal(city), quote_nullable(type),"
    " format('%s is %L and %I', city, type, 'Mixed') FROM v",
    "SELECT abs(n), round(f), round(dd, 1), ceil(f), floor(dd), trunc(f), mod(n, 3), sign(n), greatest(n, 5, NULL),"
    " least(f, 0.5), coalesce(type, 'none'), nullif(city, 'la'), IF(b, 'yes', 'no'),"
    " CASE WHEN n > 0 THEN 'pos' WHEN n < 0 THEN 'neg' ELSE 'zero' END AS c, CASE city WHEN 'la' THEN 1 ELSE 2 END AS c2"
    " FROM v",
    "SELECT jsonb_build_object('city', city, 'n', n, 'f', f, 'dd', dd, 'ts', ts, 'b', b, 'by', bb, 'iv', iv, 'j', j)"
    " AS o, jsonb_build_array(city, n, NULL) AS a, to_json(tz) AS tj, j->'a' AS ja, j->>'color' AS jc,"
    " jsonb_typeof(j) AS jt FROM v",
    "SELECT extract(year from ts) AS y, extract(epoch from tz) AS ep, date_part('dow', dt) AS dw,"
    " extract(second from ts) AS s, date_trunc('hour', tz) AS h, date_trunc('month', dt) AS m, ts + iv AS later,"
    " tz - iv AS earlier, dt + 1 AS tomorrow, statement_timestamp() AS st FROM v",
    "SELECT * FROM v WHERE city LIKE 'l%' OR type ILIKE 'BIKE' OR n BETWEEN 1 AND 100 OR n IN (1, 2, 3) OR type IS NULL",
    "SELECT city FROM v WHERE b IS TRUE AND NOT (f IS NULL) AND dd > 1 AND du < 2 AND ts < '2030-01-01'"
    " AND tz >= '2019-01-01 00:00:00+00' AND f != 'NaN'",
    "SELECT city ~ '^l' AS re, city !~* 'NY' AS re2, n & 3 AS band, n | 4 AS bor, 7 # 2 AS bx, 1 << 3 AS sh,"
    " pg_typeof(n) AS pt, crdb_internal.cluster_id() AS cid FROM v",
]

OPTION_SETS: list[dict[str, str | None]] = [
    {},
    {"envelope": "wrapped", "diff": None, "updated": None, "mvcc_timestamp": None},
    {"envelope": "bare", "key_in_value": None, "topic_in_value": None},
]


def _faces_table(tmp_path: Path) -> tuple[Any, pa.RecordBatch]:
    conn = changefeed.connect(tmp_path / "faces")
    conn.execute(
        "CREATE TABLE v (id UUID NOT NULL, city STRING NOT NULL, type STRING, n INT, f FLOAT, dd DECIMAL(10,2),"
        " du DECIMAL, ts TIMESTAMP, tz TIMESTAMPTZ, dt DATE, iv INTERVAL, j JSONB, b BOOL, bb BYTES,"
        " PRIMARY KEY (city, id)) WITH (changes = true)"
    )
    rng = random.Random(1)
    sql = (
        "UPSERT INTO v (id, city, type, n, f, dd, du, ts, tz, dt, iv, j, b, bb)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    for i in range(40):
        conn.execute(
            sql,
            (
                f"{i:08x}-9999-4800-8000-000000000009",
                rng.choice(["la", "ny", "sf"]),
                rng.choice(["bike", "scooter", None]),
                rng.randint(-1000, 1000),
                rng.choice([1.5, 0.1, 1e20, -3.25, 1e-7, 123456789.0, None, 100.0]),
                rng.choice(["1.50", "22.30", "-0.01", None]),
                rng.choice(["1.5", "100", "0.000001", None]),
                "2019-01-02 03:04:05.5",
                "2020-02-03 04:05:06+00",
                "2021-03-04",
                "26h3m4s",
                rng.choice(['{"a": 1, "b": [1,2]}', '{"color": "red"}', None]),
                rng.choice([True, False, None]),
                b"\x01\x02",
            ),
        )
    for i in range(0, 40, 3):
        conn.execute(f"DELETE FROM v WHERE id = '{i:08x}-9999-4800-8000-000000000009'")
    for i in range(1, 40, 4):
        conn.execute(f"UPDATE v SET n = n + 1, type = 'car' WHERE id = '{i:08x}-9999-4800-8000-000000000009'")
    db = conn.session.db
    db.refresh_catalog()
    table = db.find_table("v")
    batch = read_changes(db.conn, table, 0, 1 << 62)
    conn.close()
    return table, batch


def test_spark_face_equals_python_face(spark: Any, tmp_path: Path) -> None:
    table, batch = _faces_table(tmp_path)
    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    bad = []
    for q in QUERIES:
        cq = check_query(parse_query(q), table, cluster_id="c0ffee00-0000-4000-8000-000000000000")
        for raw in OPTION_SETS:
            opts = parse_crdb_options(raw, sink_scheme="topics", query=True)
            feed = FeedSpec(
                id=1,
                table_id=table.id,
                name="x",
                kind="crdb",
                topic="v",
                partitions=2,
                format="crdb-json",
                mode=Mode.NEW_IMAGE,
                crdb=opts,
                query=cq,
            )
            py = ENC.encode_python(batch, table, feed)
            sp = [
                (r["partition"], bytes(r["key"]), bytes(r["value"]), r["ts"])
                for r in ENC.encode_spark(df, table, feed).collect()
            ]
            if sp != py:
                diff = next(((a, b) for a, b in zip(py, sp, strict=False) if a != b), (len(py), len(sp)))
                bad.append((q[:60], raw, diff))
    assert bad == []


# ------------------------------------------------------------------------------------ a job
def _core_messages(db: Path, cursor: str, n: int) -> list[tuple[bytes, dict[str, Any] | None, Any]]:
    """The core changefeed's first ``n`` row messages from ``cursor``: (key, after, before)."""
    conn = changefeed.connect(db)
    out: list[tuple[bytes, dict[str, Any] | None, Any]] = []
    done = threading.Event()
    feed = conn.stream(f"EXPERIMENTAL CHANGEFEED FOR t WITH cursor = '{cursor}', diff")

    def pump() -> None:
        for _t, k, val in feed:
            if k is None:
                continue
            m = json.loads(val, parse_float=Decimal)
            out.append((k, m["after"], m["before"]))
            if len(out) >= n:
                break
        done.set()

    threading.Thread(target=pump, daemon=True).start()
    assert done.wait(120), f"{len(out)} of {n}"
    feed.close()
    conn.close()
    return out


def _expected(core: list[tuple[bytes, dict[str, Any] | None, Any]]) -> list[tuple[bytes, dict[str, Any]]]:
    """``SELECT id, upper(v) AS u, n * 2 AS n2, (cdc_prev).n AS was FROM t WHERE n % 10 = 0 OR
    (cdc_prev).n % 10 = 0`` applied to the core changefeed's messages by hand (SQL's NULL logic:
    a delete's non-key columns are NULL, an insert's cdc_prev is NULL)."""
    out = []
    for key, after, before in core:
        (kid,) = json.loads(key)
        n = after["n"] if after is not None else None
        was = before["n"] if before is not None else None
        keep = (n is not None and n % 10 == 0) or (was is not None and was % 10 == 0)
        if not keep:
            continue
        row = {
            "id": kid,
            "n2": None if n is None else n * 2,
            "u": None if after is None or after["v"] is None else after["v"].upper(),
            "was": was,
        }
        out.append((key, row))
    return out


def test_query_job_equals_filtered_core_changefeed(spark: Any, tmp_path: Path) -> None:
    from tests.test_crdb_jobs_spark import _run

    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING, n INT)")
    start = conn.db.last_ts()
    (job_id,) = conn.execute(
        f"CREATE CHANGEFEED INTO 'topics://?topic_prefix=q_' WITH cursor = '{start.crdb()}' AS SELECT id,"
        " upper(v) AS u, n * 2 AS n2, (cdc_prev).n AS was FROM t WHERE n % 10 = 0 OR (cdc_prev).n % 10 = 0"
    ).rows[0]
    (wrapped_id,) = conn.execute(
        f"CREATE CHANGEFEED INTO 'topics://?topic_prefix=d_' WITH cursor = '{start.crdb()}', envelope = 'wrapped',"
        " diff AS SELECT id FROM t WHERE event_op() = 'delete'"
    ).rows[0]
    rng = random.Random(17)
    deletes = 0
    for _ in range(150):
        with conn.transaction():
            for _ in range(rng.randint(1, 4)):
                k = rng.randrange(60)
                if rng.random() < 0.2:
                    deletes += conn.execute(f"DELETE FROM t WHERE id = {k}").rowcount
                else:
                    conn.execute(
                        "UPSERT INTO t (id, v, n) VALUES (?, ?, ?)",
                        (k, rng.choice(["a", "b", None]), rng.choice([None, *range(40)])),
                    )
    total = len(read_changes(conn.db.conn, conn.db.find_table("t"), 0, 1 << 62))
    conn.close()
    _run(db, spark)

    core = _core_messages(db, start.crdb(), total)
    got = [(k, json.loads(val, parse_float=Decimal)) for _p, _o, k, val, _ts in v.read_topic(db, "q_t")]
    assert got == _expected(core) and len(got) > 20

    dels = [json.loads(val) for _p, _o, _k, val, _ts in v.read_topic(db, "d_t")]
    core_dels = [before for _k, after, before in core if after is None]
    assert len(dels) == len(core_dels) > 0
    assert all(d["after"] is None and d["before"] is not None for d in dels)
    assert [d["before"] for d in dels] == [json.loads(json.dumps(b, default=str)) for b in core_dels]
    assert job_id != wrapped_id
