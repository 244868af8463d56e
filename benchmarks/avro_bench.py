"""Avro encoding and schema registry figures.

    .venv/bin/python benchmarks/avro_bench.py [--rows 1000000] [--skip-spark] [--lookups 20000]

(a) baseline: a plain Python loop over the change rows, one dict per row and one fastavro
    ``schemaless_writer`` call per key and per value (schema parsed once) plus Confluent framing;
(b) the encoder's Python face (``CrdbAvroEncoder.encode_python``: column-wise conversion, then
    fastavro per datum), rows/s and the ratio against (a);
(c) the Spark face (``encode_spark``: ``mapInArrow`` on the executors) over the same rows read from
    Parquet, written to Spark's ``noop`` sink; rows/s over the job only (session start and the
    Parquet write excluded) and the ratio against (a);
(d) schema registry: ``changefeed serve --registry`` in its own process;
    ``GET /subjects/<s>/versions/latest`` and ``GET /schemas/ids/<id>`` alternately over keep-alive
    connections from 1 and 4 client threads here, lookups/s.

Rows: ``t (k INT8 PRIMARY KEY, a STRING, b INT8, c FLOAT8)``, wrapped envelope with ``updated``,
one change row per key (UPSERTs), 4 topic partitions.
"""

from __future__ import annotations

import argparse
import http.client
import io
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
# Spark's Python workers import the encoder from this tree too
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)

from changefeed.engine.catalog import ColumnSchema, Role, TableSchema  # noqa: E402
from changefeed.engine.changes import change_schema  # noqa: E402
from changefeed.engine.types import resolve_type  # noqa: E402
from changefeed.feeds.spec import FeedSpec, Mode  # noqa: E402
from changefeed.formats import avro_schema as S  # noqa: E402
from changefeed.formats.base import partition_of  # noqa: E402
from changefeed.formats.crdb_avro import CrdbAvroEncoder  # noqa: E402
from changefeed.formats.schema_registry import MemoryResolver  # noqa: E402

PARTITIONS = 4


def table() -> TableSchema:
    def col(i: int, name: str, t: str, role: Role) -> ColumnSchema:
        return ColumnSchema(i, name, resolve_type(t, dialect="sql"), role)

    cols = (
        col(0, "k", "INT8", Role.PARTITION),
        col(1, "a", "STRING", Role.REGULAR),
        col(2, "b", "INT8", Role.REGULAR),
        col(3, "c", "FLOAT8", Role.REGULAR),
    )
    return TableSchema(id=1, name="t", dialect="sql", columns=cols, changes=True, next_column_id=4)


class Opts:
    envelope, updated, diff, mvcc_timestamp = "wrapped", True, False, False
    avro_schema_prefix, confluent_schema_registry = "", ""


class Feed:
    def __init__(self, t: TableSchema) -> None:
        self.crdb = Opts()
        self._spec = FeedSpec(1, t.id, "f", "crdb", "t", PARTITIONS, "crdb-avro", Mode.NEW_IMAGE)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._spec, name)


def change_rows(t: TableSchema, n: int) -> pa.RecordBatch:
    import pyarrow.compute as pc

    schema = change_schema(t)
    idx = pa.array(range(n), pa.int64())
    cols: dict[str, pa.Array] = {
        "seq": pc.add(idx, 1),
        "ts": pc.add(idx, 1_700_000_000_000_000_000),
        "lg": pa.array([0] * n, pa.int32()),
        "tx": idx,
        "op": pa.array([1] * n, pa.int8()),
        "ox": pa.array([False] * n),
        "st": pa.array([False] * n),
        "c0": idx,
        "c1": pa.array([f"name-{i}" for i in range(n)]),
        "c2": pc.multiply(idx, 7),
        "c3": pc.divide(pc.cast(idx, pa.float64()), 3.0),
    }
    for f in schema.names:
        if f not in cols:
            cols[f] = pa.nulls(n, schema.field(f).type)
    return pa.RecordBatch.from_arrays([cols[f] for f in schema.names], schema=schema)


def baseline_loop(batch: pa.RecordBatch, t: TableSchema) -> float:
    """One dict and two fastavro calls per row, straight from the rows."""
    import fastavro

    opts = S.AvroOptions(updated=True)
    key_s = fastavro.parse_schema(S.key_schema(t, opts))
    val_s = fastavro.parse_schema(S.value_schema(t, opts))
    kf, vf = b"\x00" + struct.pack(">I", 1), b"\x00" + struct.pack(">I", 2)
    start = time.perf_counter()
    out = []
    for r in batch.to_pylist():
        kb, vb = io.BytesIO(), io.BytesIO()
        fastavro.schemaless_writer(kb, key_s, {"k": r["c0"]})
        row = {"k": r["c0"], "a": r["c1"], "b": r["c2"], "c": r["c3"]}
        fastavro.schemaless_writer(vb, val_s, {"after": row, "updated": f"{r['ts']}.{r['lg']:010d}"})
        key = kf + kb.getvalue()
        out.append((partition_of(key, PARTITIONS), key, vf + vb.getvalue(), r["ts"]))
    return time.perf_counter() - start


def python_face(batch: pa.RecordBatch, t: TableSchema) -> float:
    enc = CrdbAvroEncoder(MemoryResolver())
    start = time.perf_counter()
    step = 100_000
    for off in range(0, batch.num_rows, step):
        enc.encode_python(batch.slice(off, step), t, Feed(t))  # type: ignore[arg-type]
    return time.perf_counter() - start


def spark_face(batch: pa.RecordBatch, t: TableSchema) -> float:
    import pyarrow.parquet as pq

    from changefeed.pipeline.session import get_spark

    tmp = Path(tempfile.mkdtemp(prefix="avro-bench-"))
    try:
        pq.write_table(pa.Table.from_batches([batch]), tmp / "rows.parquet", row_group_size=100_000)
        spark = get_spark("avro-bench")
        df = spark.read.parquet(str(tmp / "rows.parquet"))
        enc = CrdbAvroEncoder(MemoryResolver())
        enc.encode_spark(df.limit(10), t, Feed(t)).write.format("noop").mode("overwrite").save()  # warm up
        start = time.perf_counter()
        enc.encode_spark(df, t, Feed(t)).write.format("noop").mode("overwrite").save()  # type: ignore[arg-type]
        return time.perf_counter() - start
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lookups(n: int, threads: int) -> float:
    """Lookups/s against ``changefeed serve --registry`` in its own process (clients here)."""
    tmp = Path(tempfile.mkdtemp(prefix="avro-bench-reg-"))
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "changefeed.cli.main",
        "serve",
        "--db",
        str(tmp),
        "--registry",
        f"127.0.0.1:{port}",
    ]
    server = subprocess.Popen(cmd, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        c = http.client.HTTPConnection("127.0.0.1", port)
        body = b'{"schema": "{\\"type\\":\\"record\\",\\"name\\":\\"t\\",\\"fields\\":[]}"}'
        c.request("POST", "/subjects/t-value/versions", body, {"Content-Type": "application/json"})
        assert c.getresponse().read() == b'{"id":1}'

        def work(count: int) -> None:
            conn = http.client.HTTPConnection("127.0.0.1", port)
            for i in range(count):
                conn.request("GET", "/subjects/t-value/versions/latest" if i % 2 else "/schemas/ids/1")
                resp = conn.getresponse()
                resp.read()
                assert resp.status == 200

        ts = [threading.Thread(target=work, args=(n // threads,)) for _ in range(threads)]
        start = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        return (n // threads) * threads / (time.perf_counter() - start)
    finally:
        server.terminate()
        server.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--lookups", type=int, default=20_000)
    ap.add_argument("--skip-spark", action="store_true")
    args = ap.parse_args()
    t = table()
    batch = change_rows(t, args.rows)
    n = args.rows
    base = baseline_loop(batch, t)
    print(f"(a) baseline fastavro loop: {n / base:,.0f} rows/s ({base:.1f} s)")
    py = python_face(batch, t)
    print(f"(b) encode_python:          {n / py:,.0f} rows/s ({py:.1f} s), {base / py:.2f}x the loop")
    if not args.skip_spark:
        sp = spark_face(batch, t)
        print(f"(c) encode_spark:           {n / sp:,.0f} rows/s ({sp:.1f} s), {base / sp:.2f}x the loop")
    for threads in (1, 4):
        print(f"(d) registry lookups, {threads} client(s): {lookups(args.lookups, threads):,.0f}/s")


if __name__ == "__main__":
    main()
