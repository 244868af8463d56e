"""Initial-scan throughput on Spark: ``run_initial_scan`` over an N-row table.

    .venv/bin/python benchmarks/scan_bench.py [--rows 2000000] [--chunk-rows N] [--writer RATE]
                                              [--cache DIR] [--profile]

Builds (once, in a child process, then cached under ``--cache``) a database with the YDB-style table
``t (k Uint64, a Utf8, b Int64, c Double, PRIMARY KEY (k))`` filled with N rows by ``executemany``
UPSERTs in 100,000-row transactions, then ``ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON',
MODE = 'NEW_AND_OLD_IMAGES', INITIAL_SCAN = TRUE)``. Each run works on a fresh copy of it.

With a warmed Spark session (session start and Python worker start excluded) it times
``run_initial_scan(get_spark(), db, feed)`` and prints rows/s against the target (>= 100,000
rows/s), the peak RSS of the driver (VmHWM), of the JVM child (VmHWM) and the sampled peak of the
whole process tree (driver + JVM + Python workers), and the machine's core count. It then checks
that the topic holds exactly N records (plus one per row written by ``--writer`` is *not* expected:
the writer's changes belong to the streaming query, not to the scan).

``--writer RATE`` runs a concurrent writer thread updating random existing keys at about RATE rows/s
during the scan (so the snapshot's change-stream lookups have work to do). ``--profile`` runs
cProfile over ``read_chunk`` of one chunk of the built table in-process and prints the top entries.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from proctree import TreeMemory, comm, cpu_seconds, status_kb, tree

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
FEED = "FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES', INITIAL_SCAN = TRUE"
TARGET = 100_000


def build(db: Path, rows: int, chunk: int = 100_000) -> float:
    import changefeed

    t0 = time.perf_counter()
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (k Uint64, a Utf8, b Int64, c Double, PRIMARY KEY (k))")
        for lo in range(0, rows, chunk):
            conn.executemany(
                "UPSERT INTO t (k, a, b, c) VALUES (?, ?, ?, ?)",
                [(k, f"name-{k}", k * 7 % 1000, k / 4.0) for k in range(lo, min(rows, lo + chunk))],
            )
        conn.execute(f"ALTER TABLE t ADD CHANGEFEED f WITH ({FEED})")
    return time.perf_counter() - t0


def topic_count(db: Path, topic: str = "t/f") -> int:
    from changefeed.topics import TopicStore

    store = TopicStore(db)
    try:
        return sum(nxt for _, nxt in store.offsets(topic).values())
    finally:
        store.close()


# ------------------------------------------------------------------------------------ runs
def writer_thread(db: Path, rows: int, rate: int, stop: threading.Event, counter: list[int]) -> None:
    import changefeed

    rng = random.Random(7)
    conn = changefeed.connect(db)
    try:
        per = max(1, rate // 20)
        while not stop.is_set():
            keys = [rng.randrange(rows) for _ in range(per)]
            conn.executemany(
                "UPSERT INTO t (k, a, b, c) VALUES (?, ?, ?, ?)", [(k, f"upd-{k}", -1, 0.5) for k in keys]
            )
            counter[0] += per
            time.sleep(0.05)
    finally:
        conn.close()


def profile(db: Path, chunk_rows: int) -> None:
    import cProfile
    import pstats

    from changefeed.pipeline.delivery.progress import active_feeds
    from changefeed.pipeline.snapshot import chunks, scan
    from changefeed.pipeline.sources.journal import load_table

    feed = active_feeds(db)[0].spec
    table = load_table(db, feed.table_id)
    plan = scan.load_or_plan(db, feed, table, chunk_rows)
    chunks.read_chunk(str(db), table, feed, plan["bounds"], 0)  # warm: imports (pandas via pyarrow), caches
    t0 = time.perf_counter()
    plain = chunks.read_chunk(str(db), table, feed, plan["bounds"], 1)
    dt = time.perf_counter() - t0
    print(
        f"read_chunk: {plain.num_rows} rows in {dt:.3f} s ({plain.num_rows / dt:,.0f} rows/s, not profiled)"
    )
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    out = chunks.read_chunk(str(db), table, feed, plan["bounds"], 1)
    pr.disable()
    dt = time.perf_counter() - t0
    print(f"read_chunk: {out.num_rows} rows in {dt:.3f} s ({out.num_rows / dt:,.0f} rows/s, profiled)")
    pstats.Stats(pr).sort_stats("cumulative").print_stats(25)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument(
        "--chunk-rows", type=int, default=None, help="scan chunk rows (default: chunks.CHUNK_ROWS)"
    )
    ap.add_argument(
        "--writer", type=int, default=0, help="concurrent writer rows/s during the scan (0: none)"
    )
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "changefeed-scan-bench")
    ap.add_argument("--profile", action="store_true", help="cProfile read_chunk of one chunk, no Spark")
    ap.add_argument("--build-only", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    n = args.rows

    if args.build_only is not None:
        dt = build(args.build_only, n)
        print(f"built {n:,} rows in {dt:.1f} s ({n / dt:,.0f} rows/s)")
        return 0

    from changefeed.engine.database import FORMAT_VERSION

    template = args.cache / f"rows-{n}-format{FORMAT_VERSION}"  # a new layout builds a new cache
    if not (template / "changefeed.db").exists():
        shutil.rmtree(template, ignore_errors=True)
        template.parent.mkdir(parents=True, exist_ok=True)
        tmp = template.with_name(template.name + ".building")
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([PY, __file__, "--rows", str(n), "--build-only", str(tmp)], check=True)
        tmp.rename(template)

    work = Path(tempfile.mkdtemp(prefix="scan-bench-"))
    try:
        db = work / "db"
        shutil.copytree(template, db)
        from changefeed.pipeline.snapshot import chunks, scan

        chunk_rows = args.chunk_rows or chunks.CHUNK_ROWS
        print(f"scan module: {scan.__file__}")
        if args.profile:
            profile(db, chunk_rows)
            return 0

        from changefeed.pipeline.delivery.progress import active_feeds
        from changefeed.pipeline.spark.session import get_spark

        t0 = time.perf_counter()
        spark = get_spark()
        par = max(2, int(spark.sparkContext.defaultParallelism))
        # warm up: JVM, Python workers (one per core), Arrow path
        for _ in range(2):
            spark.range(0, par * 4, numPartitions=par).mapInArrow(lambda it: it, "id long").count()
        print(f"session start + warm-up: {time.perf_counter() - t0:.1f} s (excluded)")

        feed = active_feeds(db)[0].spec
        mem = TreeMemory()
        mem.start()
        stop = threading.Event()
        written = [0]
        th = None
        if args.writer:
            th = threading.Thread(target=writer_thread, args=(db, n, args.writer, stop, written), daemon=True)
            th.start()
        cpu0 = cpu_seconds(tree(os.getpid()))
        t0 = time.perf_counter()
        try:
            scan.run_initial_scan(spark, db, feed, chunk_rows=chunk_rows)
        finally:
            dt = time.perf_counter() - t0
            stop.set()
            if th is not None:
                th.join()
            mem.stop.set()
            mem.join()
        rate = n / dt
        cpu = cpu_seconds(tree(os.getpid())) - cpu0
        load = os.getloadavg()[0]
        got = topic_count(db)
        java = [p for p in tree(os.getpid())[1:] if comm(p) == "java"]
        java_hwm = max((status_kb(p, "VmHWM") for p in java), default=0)
        drv_hwm = status_kb(os.getpid(), "VmHWM")
        res: list[tuple[str, Any, str]] = [
            ("rows", f"{n:,}", ""),
            ("chunk rows", f"{chunk_rows:,}", ""),
            ("concurrent writes", f"{written[0]:,} rows" if args.writer else "none", ""),
            ("scan wall", f"{dt:.1f} s", ""),
            ("scan rows/s", f"{rate:,.0f}", f">= {TARGET:,} rows/s: {'OK' if rate >= TARGET else 'MISSED'}"),
            ("CPU time (driver, JVM, workers)", f"{cpu:.1f} s", f"{n / cpu:,.0f} rows per CPU-second"),
            ("load average (1 min)", f"{load:.1f}", "other processes share the cores when > cores"),
            ("topic records", f"{got:,}", "== rows: " + ("OK" if got == n else "MISMATCH")),
            ("driver VmHWM", f"{drv_hwm / 1024 / 1024:.2f} GB", ""),
            ("JVM VmHWM", f"{java_hwm / 1024 / 1024:.2f} GB", ""),
            ("driver + JVM", f"{(drv_hwm + java_hwm) / 1024 / 1024:.2f} GB", ""),
            (
                "tree peak (sampled VmRSS sum)",
                f"{mem.peak_sum_kb / 1024 / 1024:.2f} GB",
                "incl. Python workers",
            ),
            ("cores", str(os.cpu_count()), f"Spark defaultParallelism {par}"),
        ]
        for name, val, note in res:
            print(f"{name:32s} {val:>14s}  {note}")
        spark.stop()
        return 0 if got == n else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
