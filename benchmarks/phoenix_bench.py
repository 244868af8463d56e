"""Apache Phoenix CDC: time-range reads through the time index, and the write cost of CDC.

    python benchmarks/phoenix_bench.py [--changes 1000000] [--window-ms 1000] [--write-rows 200000] [--write-rounds 3]

1. Builds a history of ``--changes`` changes (UPSERTs of 1,000 rows per transaction, the clock
   stepping 100 ms per transaction, so one second holds 10,000 changes) in a Phoenix table with a
   CDC object, then times a one-second window in the middle of it: time to the first row through
   the time index (``SELECT * FROM <cdc> WHERE PHOENIX_ROW_TIMESTAMP() >= .. AND < ..``), beside
   a baseline that answers the same range by scanning the change history without the index, and
   their ratio. Target: <= 20 ms to the first row in a 10,000,000-change history.
2. Streams a range of up to 1,000,000 changes with post images (rows/s). Target: >= 200,000.
3. Writes ``--write-rows`` rows in 1,000-row UPSERT transactions into the same table shape with
   and without a CDC object, alternating ``--write-rounds`` times, and prints the best rows/s of
   each, their ratio (target: >= 0.7), and the same per CPU second of this process (which the
   other processes on a shared machine disturb much less than wall-clock time).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import changefeed
from changefeed.engine import phoenix
from changefeed.formats import phoenix_batch

MS = 1_000_000
TXN_ROWS = 1000
STEP_MS = 100


class StepClock:
    def __init__(self, start_ns: int) -> None:
        self.now = start_ns

    def now_ns(self) -> int:
        return self.now


DDL = "CREATE TABLE T (k BIGINT NOT NULL, v1 VARCHAR, v2 BIGINT, v3 DOUBLE CONSTRAINT pk PRIMARY KEY (k)) COLUMN_ENCODED_BYTES=0"
UPSERT = "UPSERT INTO T (k, v1, v2, v3) VALUES (?, ?, ?, ?)"


def _batch(start: int, n: int, keys: int) -> list[tuple[int, str, int, float]]:
    return [((i * 7919) % keys, f"value-{i}", i, i / 3) for i in range(start, start + n)]


def build_history(db: Path, changes: int) -> tuple[changefeed.Connection, StepClock]:
    clock = StepClock(1_716_890_130_000 * MS)
    conn = changefeed.connect(db, clock=clock)
    conn.execute(DDL)
    conn.execute("CREATE CDC C ON T INCLUDE (POST)")
    keys = max(1, changes // 4)  # every key changes about four times
    t0 = time.perf_counter()
    for start in range(0, changes, TXN_ROWS):
        clock.now += STEP_MS * MS
        conn.executemany(UPSERT, _batch(start, min(TXN_ROWS, changes - start), keys))
    took = time.perf_counter() - t0
    print(f"history: {changes:,} changes in {took:.1f} s ({changes / took:,.0f} changes/s with CDC)")
    return conn, clock


def window_read(conn: changefeed.Connection, lo_ms: int, hi_ms: int) -> tuple[float, float, int]:
    """(ms to first row, ms for all rows, rows) through the time index."""
    t = conn.db.find_table("T")
    assert t is not None
    t0 = time.perf_counter()
    rows = phoenix_batch.cdc_rows(conn.db.conn, t, frozenset({"POST"}), lo_ms, hi_ms)
    first = next(rows, None)
    t1 = time.perf_counter()
    n = (first is not None) + sum(1 for _ in rows)
    t2 = time.perf_counter()
    return (t1 - t0) * 1000, (t2 - t0) * 1000, n


def window_scan_baseline(conn: changefeed.Connection, lo_ms: int, hi_ms: int) -> tuple[float, float, int]:
    """The same range answered without the index: scan the change history in commit order."""
    t = conn.db.find_table("T")
    assert t is not None
    t0 = time.perf_counter()
    cur = conn.db.conn.execute(
        f"SELECT seq, ts, c0, c1, c2, c3 FROM x{t.id} WHERE ts >= ? AND ts < ?", (lo_ms * MS, hi_ms * MS)
    )
    first = cur.fetchone()
    t1 = time.perf_counter()
    n = (first is not None) + len(cur.fetchall())
    t2 = time.perf_counter()
    return (t1 - t0) * 1000, (t2 - t0) * 1000, n


def stream_rate(conn: changefeed.Connection, lo_ms: int, limit: int) -> tuple[int, float, float]:
    """(changes, wall seconds, CPU seconds of this process) for streaming the range."""
    t = conn.db.find_table("T")
    assert t is not None
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    for _ in phoenix_batch.cdc_rows(conn.db.conn, t, frozenset({"POST"}), lo_ms, None):
        n += 1
        if n >= limit:
            break
    return n, time.perf_counter() - t0, time.process_time() - c0


def tree_cpu() -> float:
    """CPU seconds of this process and its live descendants (Spark's JVM, its Python workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            procs[int(name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    tree, grew = {os.getpid()}, True
    while grew:
        grew = False
        for pid, (parent, _) in procs.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(procs[p][1] for p in tree if p in procs)


def spark_rate(db: Path) -> tuple[int, float, float]:
    """The Spark loop's read: every change through ``format("phoenix-cdc")`` into Spark's noop
    sink (session start and a warm-up read excluded): (changes, wall seconds, CPU seconds of
    the process tree)."""
    from changefeed.pipeline.spark.session import get_spark

    spark = get_spark()
    reader = spark.read.format("phoenix-cdc").option("cdc", "C").option("include", "POST")
    reader.load(str(db)).limit(1000).collect()  # warm: Python workers, imports
    n = reader.load(str(db)).count()
    t0, c0 = time.perf_counter(), tree_cpu()
    reader.load(str(db)).write.format("noop").mode("overwrite").save()
    return n, time.perf_counter() - t0, tree_cpu() - c0


def write_rate(db: Path, rows: int, cdc: bool) -> tuple[float, float]:
    """(rows per wall second, rows per CPU second of this process)."""
    conn = changefeed.connect(db)
    conn.execute(DDL)
    if cdc:
        conn.execute("CREATE CDC C ON T INCLUDE (PRE, POST)")
    t0, c0 = time.perf_counter(), time.process_time()
    for start in range(0, rows, TXN_ROWS):
        conn.executemany(UPSERT, _batch(start, min(TXN_ROWS, rows - start), rows // 2))
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    conn.close()
    return rows / took, rows / cpu


def write_rates(root: Path, rows: int, rounds: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """The best of ``rounds`` alternating runs without and with CDC: on a shared machine a
    single pair mostly measures how the load changed between the two runs."""
    plain: list[tuple[float, float]] = []
    with_cdc: list[tuple[float, float]] = []
    for r in range(rounds):
        plain.append(write_rate(root / f"plain{r}", rows, cdc=False))
        with_cdc.append(write_rate(root / f"cdc{r}", rows, cdc=True))

    def best(runs: list[tuple[float, float]]) -> tuple[float, float]:
        return max(w for w, _ in runs), max(c for _, c in runs)

    return best(plain), best(with_cdc)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--changes", type=int, default=1_000_000)
    p.add_argument("--window-ms", type=int, default=1000)
    p.add_argument("--stream", type=int, default=1_000_000)
    p.add_argument("--write-rows", type=int, default=200_000)
    p.add_argument(
        "--write-rounds", type=int, default=3, help="alternating runs without/with CDC; best of each"
    )
    p.add_argument("--dir", type=Path, default=None, help="where to build (default: a temp dir)")
    p.add_argument("--skip-spark", action="store_true", help="leave out the Spark read")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        conn, clock = build_history(root / "history", args.changes)
        t = conn.db.find_table("T")
        assert t is not None
        cdc = phoenix.cdc_of(t)
        assert cdc is not None
        first_ms = cdc.created_ms
        span = clock.now // MS - first_ms
        lo = first_ms + span // 2
        hi = lo + args.window_ms
        for _ in range(2):  # the second run is with a warm page cache
            idx = window_read(conn, lo, hi)
            base = window_scan_baseline(conn, lo, hi)
        print(
            f"window {args.window_ms} ms in {args.changes:,} changes: time index {idx[0]:.2f} ms to first row "
            f"({idx[1]:.1f} ms for {idx[2]:,} rows); scan-everything baseline {base[0]:.1f} ms to first row "
            f"({base[1]:.1f} ms for {base[2]:,} rows); ratio {base[0] / max(idx[0], 1e-6):,.0f}x"
        )
        n, took, cpu = stream_rate(conn, first_ms, args.stream)
        print(
            f"stream: {n:,} changes with post images in {took:.2f} s = {n / took:,.0f} rows/s"
            f"  (target 200,000: ratio {n / took / 200_000:.2f}); CPU {cpu:.2f} s = {n / cpu:,.0f} rows per CPU second;"
            f" load average {os.getloadavg()[0]:.1f}"
        )
        conn.close()
        if not args.skip_spark:
            n, took, cpu = spark_rate(root / "history")
            print(
                f"spark: format('phoenix-cdc') batch read of {n:,} changes with post images in {took:.2f} s"
                f" = {n / took:,.0f} rows/s  (target 100,000: ratio {n / took / 100_000:.2f});"
                f" CPU of the process tree {cpu:.2f} s = {cpu / n * 1e6:.2f} us per change;"
                f" load average {os.getloadavg()[0]:.1f}"
            )
        plain, with_cdc = write_rates(root, args.write_rows, args.write_rounds)
        print(
            f"writes (1,000-row UPSERT transactions, best of {args.write_rounds}): without CDC {plain[0]:,.0f} rows/s,"
            f" with CDC {with_cdc[0]:,.0f} rows/s, ratio {with_cdc[0] / plain[0]:.2f}  (target 0.7); per CPU second"
            f" {plain[1]:,.0f} / {with_cdc[1]:,.0f}, ratio {with_cdc[1] / plain[1]:.2f}"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
