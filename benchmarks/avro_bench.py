"""Avro encoding and schema registry figures.

    .venv/bin/python benchmarks/avro_bench.py [--rows 1000000] [--skip-spark] [--lookups 20000] [--job]

(a) baseline: a plain Python loop over the change rows, one dict per row and one fastavro
    ``schemaless_writer`` call per key and per value (schema parsed once) plus Confluent framing;
(b) the encoder's Python face (``CrdbAvroEncoder.encode_python``: Avro binary written column-wise
    for the whole batch, see ``formats/avro_columns.py``), rows/s and the ratio against (a);
(c) the Spark face (``encode_spark``: ``mapInArrow`` on the executors) over the same rows read from
    Parquet (two files, one per core), written to Spark's ``noop`` sink; rows/s over the job only
    (session start and the Parquet write excluded) and the ratio against (a); (c0) the same input
    columns through an identity ``mapInArrow``: Spark's Arrow exchange with its Python workers
    alone, the floor under (c);
(d) schema registry: ``changefeed serve --registry`` in its own process;
    ``GET /subjects/<s>/versions/latest`` and ``GET /schemas/ids/<id>`` alternately over keep-alive
    connections from 1 and 4 client threads here, lookups/s;
(e) with ``--job``: the Avro *job* over a journal of N rows: ``CREATE CHANGEFEED FOR t INTO
    'topics://' WITH format = avro, confluent_schema_registry = 'http://127.0.0.1:PORT', updated,
    no_initial_scan`` created first, N rows UPSERTed in 50,000-row transactions, then
    ``changefeed run --until-idle`` against a registry served by ``changefeed serve --registry``:
    delivery-phase rate and rows / wall (see ``crdb_job_bench.py`` for what each covers), ratio
    against (a); then, unless ``--skip-spark``, (f) a batch read of the same journal through the
    ``changefeed-journal`` source into ``noop`` and (g) that read + ``encode_spark``: the job's
    delivery minus (g) is its shuffle, sort and topic append. ``--job-json``: the same job in
    ``format = json`` (what is not the encoder costs the same).

Every figure also prints CPU time per row (this process's for (a) and (b); the whole process tree,
driver, JVM and Python workers, for (c); the ``run`` child's tree for (e)): the machine is shared,
so wall rates are noisy and CPU/row is the robust figure.

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
    avro_schema_prefix, confluent_schema_registry, virtual_columns = "", "", "omitted"


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


def cpu_self() -> float:
    return time.process_time()


def cpu_tree() -> float:
    from proctree import cpu_seconds, tree

    return cpu_seconds(tree(os.getpid()))


class Timed:
    """Wall and CPU seconds of a block (CPU from ``clock``)."""

    def __init__(self, clock: Any = cpu_self) -> None:
        self.clock = clock
        self.wall = self.cpu = 0.0

    def __enter__(self) -> Timed:
        self._w, self._c = time.perf_counter(), self.clock()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self._w, self.clock() - self._c


def baseline_loop(batch: pa.RecordBatch, t: TableSchema) -> Timed:
    """One dict and two fastavro calls per row, straight from the rows."""
    import fastavro

    opts = S.AvroOptions(updated=True)
    key_s = fastavro.parse_schema(S.key_schema(t, opts))
    val_s = fastavro.parse_schema(S.value_schema(t, opts))
    kf, vf = b"\x00" + struct.pack(">I", 1), b"\x00" + struct.pack(">I", 2)
    out = []
    with Timed() as timed:
        loop(batch, key_s, val_s, kf, vf, out)
    return timed


def loop(batch: pa.RecordBatch, key_s: Any, val_s: Any, kf: bytes, vf: bytes, out: list[Any]) -> None:
    import fastavro

    for r in batch.to_pylist():
        kb, vb = io.BytesIO(), io.BytesIO()
        fastavro.schemaless_writer(kb, key_s, {"k": r["c0"]})
        row = {"k": r["c0"], "a": r["c1"], "b": r["c2"], "c": r["c3"]}
        fastavro.schemaless_writer(vb, val_s, {"after": row, "updated": f"{r['ts']}.{r['lg']:010d}"})
        key = kf + kb.getvalue()
        out.append((partition_of(key, PARTITIONS), key, vf + vb.getvalue(), r["ts"]))


def python_face(batch: pa.RecordBatch, t: TableSchema) -> Timed:
    enc = CrdbAvroEncoder(MemoryResolver())
    step = 100_000
    with Timed() as timed:
        for off in range(0, batch.num_rows, step):
            enc.encode_python(batch.slice(off, step), t, Feed(t))  # type: ignore[arg-type]
    return timed


def _identity(batches: Any) -> Any:
    yield from batches


def spark_face(batch: pa.RecordBatch, t: TableSchema) -> tuple[Timed, Timed]:
    import pyarrow.parquet as pq

    from changefeed.pipeline.spark.session import get_spark

    tmp = Path(tempfile.mkdtemp(prefix="avro-bench-"))
    try:
        half = (batch.num_rows + 1) // 2  # one file per core: Spark reads each file as one split
        for i, part in enumerate((batch.slice(0, half), batch.slice(half))):
            pq.write_table(pa.Table.from_batches([part]), tmp / f"rows-{i}.parquet", row_group_size=100_000)
        spark = get_spark("avro-bench")
        df = spark.read.parquet(str(tmp))
        enc = CrdbAvroEncoder(MemoryResolver())
        enc.encode_spark(df.limit(10), t, Feed(t)).write.format("noop").mode("overwrite").save()  # warm up
        with Timed(cpu_tree) as timed:
            enc.encode_spark(df, t, Feed(t)).write.format("noop").mode("overwrite").save()  # type: ignore[arg-type]
        # the floor: the same input columns through an identity mapInArrow (Spark's Arrow exchange)
        from changefeed.formats.crdb_avro import input_columns

        cols = df.select(*input_columns(enc.plan(t, Feed(t))))  # type: ignore[arg-type]
        with Timed(cpu_tree) as floor:
            cols.mapInArrow(_identity, cols.schema).write.format("noop").mode("overwrite").save()
        return timed, floor
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def start_registry(tmp: Path, port: int) -> subprocess.Popen[bytes]:
    """``changefeed serve --registry`` in its own process, once it accepts connections."""
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
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return server


def run_until_idle(db: Path, topic: str, expect: int) -> dict[str, Any]:
    """``changefeed run --until-idle``: wall, the delivery phase (first record in the topic to the
    last), and the CPU seconds of its whole process tree (driver, JVM, Python workers) sampled
    from /proc: in all, and within the delivery phase."""
    from pipeline_bench import CLI, env, topic_count
    from proctree import cpu_seconds, tree

    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [CLI, "run", "--db", str(db), "--until-idle"],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    out: list[bytes] = []
    reader = threading.Thread(
        target=lambda: out.append(proc.stdout.read() if proc.stdout else b""), daemon=True
    )
    reader.start()
    first: tuple[float, int, float] | None = None  # wall, records, tree CPU
    last: tuple[float, float] | None = None
    cpu = 0.0
    while proc.poll() is None:
        cpu = max(cpu, cpu_seconds(tree(proc.pid)))
        n, now = topic_count(db, topic), time.perf_counter()
        if n and first is None:
            first = (now, n, cpu)
        if n >= expect and last is None:
            last = (now, cpu)
        time.sleep(0.1)
    end = time.perf_counter()
    reader.join(10)
    if proc.returncode != 0:
        raise RuntimeError(f"changefeed run failed ({proc.returncode}):\n{b''.join(out).decode()[-3000:]}")
    n = topic_count(db, topic)
    first = first or (end, 0, cpu)
    last = last or (end, cpu)
    return {
        "records": n,
        "wall": end - t0,
        "to_first": first[0] - t0,
        "delivery_s": max(last[0] - first[0], 1e-9),
        "delivered": n - first[1],
        "cpu": cpu,
        "delivery_cpu": last[1] - first[2],
    }


def job_stages(db: Path, table_id: int) -> tuple[Timed, Timed]:
    """(f) the journal source read alone into ``noop``, (g) the journal read + ``encode_spark``
    into ``noop`` (batch reads of the same journal, in this process's Spark session): the job's
    delivery minus (g) is its shuffle, sort and topic append."""
    from changefeed.pipeline.sources.journal import load_table
    from changefeed.pipeline.spark.session import get_spark

    spark = get_spark("avro-bench")
    t = load_table(db, table_id)
    df = (
        spark.read.format("changefeed-journal")
        .option("path", str(db))
        .option("table_id", str(table_id))
        .load()
    )
    enc = CrdbAvroEncoder(MemoryResolver())
    enc.encode_spark(df.limit(10), t, Feed(t)).write.format("noop").mode("overwrite").save()  # type: ignore[arg-type]
    with Timed(cpu_tree) as read:
        df.write.format("noop").mode("overwrite").save()
    with Timed(cpu_tree) as both:
        enc.encode_spark(df, t, Feed(t)).write.format("noop").mode("overwrite").save()  # type: ignore[arg-type]
    return read, both


def job(rows: int, fmt: str = "avro", stages: bool = True) -> dict[str, Any]:
    """(e): the Avro changefeed job over a journal of ``rows`` change rows (see the docstring);
    ``fmt="json"``: the same job in ``format = json`` (what is not the encoder costs the same)."""
    import changefeed

    tmp = Path(tempfile.mkdtemp(prefix="avro-bench-job-"))
    port = free_port()
    registry = start_registry(tmp / "registry", port)
    try:
        db = tmp / "db"
        t0 = time.perf_counter()
        with changefeed.connect(db) as conn:
            conn.execute(
                "CREATE TABLE t (k INT8 PRIMARY KEY, a STRING, b INT8, c FLOAT8) WITH (uniform_partitions = 4)"
            )
            conn.execute(
                "CREATE CHANGEFEED FOR t INTO 'topics://' WITH "
                + (
                    f"format = avro, confluent_schema_registry = 'http://127.0.0.1:{port}', "
                    if fmt == "avro"
                    else ""
                )
                + "updated, no_initial_scan"
            )
            chunk = 50_000
            for lo in range(0, rows, chunk):
                conn.executemany(
                    "UPSERT INTO t (k, a, b, c) VALUES (?, ?, ?, ?)",
                    ((k, f"name-{k}", k * 7, k / 3.0) for k in range(lo, min(rows, lo + chunk))),
                )
            table_id = conn.db.find_table("t").id  # type: ignore[union-attr]
        built = time.perf_counter() - t0
        res = run_until_idle(db, "t", rows)
        res["built"] = built
        if fmt == "avro" and stages:
            res["stages"] = job_stages(db, table_id)
        return res
    finally:
        registry.terminate()
        registry.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lookups(n: int, threads: int) -> float:
    """Lookups/s against ``changefeed serve --registry`` in its own process (clients here)."""
    tmp = Path(tempfile.mkdtemp(prefix="avro-bench-reg-"))
    port = free_port()
    server = start_registry(tmp, port)
    try:
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
    ap.add_argument("--job", action="store_true", help="also time the Avro job over a journal of --rows rows")
    ap.add_argument(
        "--job-json", action="store_true", help="and the same job in format = json, for comparison"
    )
    args = ap.parse_args()
    t = table()
    batch = change_rows(t, args.rows)
    n = args.rows
    print(f"load average at start: {os.getloadavg()[0]:.2f}")

    def line(name: str, wall: float, cpu: float, base: float | None) -> None:
        ratio = f", {base / wall:.2f}x the loop" if base else ""
        print(f"{name}{n / wall:,.0f} rows/s ({wall:.1f} s){ratio}; CPU {cpu / n * 1e6:.2f} us/row")

    base = baseline_loop(batch, t)
    line("(a) baseline fastavro loop: ", base.wall, base.cpu, None)
    py = python_face(batch, t)
    line("(b) encode_python:          ", py.wall, py.cpu, base.wall)
    if not args.skip_spark:
        sp, floor = spark_face(batch, t)
        line("(c) encode_spark:           ", sp.wall, sp.cpu, base.wall)
        line("(c0) identity mapInArrow:   ", floor.wall, floor.cpu, base.wall)
    for fmt in ["avro"] * args.job + ["json"] * args.job_json:
        j = job(n, fmt, stages=not args.skip_spark)
        print(f"(e) {fmt}: journal of {n:,} rows built in {j['built']:.1f} s")
        d = j["delivered"]
        print(
            f"(e) {fmt} job, delivery phase: {d / j['delivery_s']:,.0f} rows/s ({d:,} rows in {j['delivery_s']:.1f} s), "
            f"{d / j['delivery_s'] / (n / base.wall):.2f}x the loop; CPU {j['delivery_cpu'] / max(d, 1) * 1e6:.2f} us/row"
        )
        line(f"(e) {fmt} job, rows / wall:    ", j["wall"], j["cpu"], base.wall)
        print(f"    first record after {j['to_first']:.1f} s; {j['records']:,} records in the topic")
        if "stages" in j:
            read, both = j["stages"]
            line("(f) journal read -> noop:     ", read.wall, read.cpu, base.wall)
            line("(g) journal read + encode:    ", both.wall, both.cpu, base.wall)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    for threads in (1, 4):
        print(f"(d) registry lookups, {threads} client(s): {lookups(args.lookups, threads):,.0f}/s")


if __name__ == "__main__":
    main()
