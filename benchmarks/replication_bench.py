"""Asynchronous replication (issue 20): applied rows/s in ROW and GLOBAL, and the GLOBAL lag.

    .venv/bin/python benchmarks/replication_bench.py [--rows 300000] [--batch 50000] [--barrier-every 25000] [--apply-interval PT1S]
        [--lag-seconds 60] [--rate 5000] [--interval PT10S] [--skip-apply] [--skip-lag]

1. **Applied rows/s.** A source ``t (k Uint64, a Utf8, b Int64, c Double)`` with 4 partitions
   gets ``--rows`` distinct keys in 10,000-row transactions; a destination creates ``CREATE ASYNC
   REPLICATION r FOR t AS t_r`` (ROW, then GLOBAL with ``COMMIT_INTERVAL`` ``--apply-interval``)
   and the replication's changefeed backlog is delivered to its topics beforehand (the source's
   work, not timed), one delivery every ``--barrier-every`` rows, an interval apart, as a
   continuous pipeline delivers (a GLOBAL topic has a barrier after each). Then timed, each way:

   * the Spark apply query (``format("changefeed-replication")`` + ``foreachBatch`` into the
     Applier, ``--batch`` records per trigger), from the start of its first micro-batch to the end
     of its last (session start and query planning excluded);
   * the Applier alone on the same records in ``--batch`` chunks (no Spark): the floor.

   Beside the wall-clock rates it prints rows per CPU second (the process tree's for Spark, this
   process's for the Applier), which the other processes on a shared machine disturb much less.
   Targets: ROW >= 50,000 rows/s; GLOBAL >= 0.7x ROW.

2. **GLOBAL lag at a steady rate.** A continuous ``changefeed run --db DST`` (it delivers the local
   source's changefeeds and applies) while a writer commits ``--rate`` rows/s into the source in
   50 ms transactions (after a warm-up: one probe row applied). A sampler reads the destination
   every 25 ms: lag = now - the barrier applied (the replica equals the source as of it), so it
   includes the wait for the barrier, delivery, the apply trigger and the apply. Prints
   p50/p99/max.
   Target: p99 <= 2 x COMMIT_INTERVAL.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import changefeed
from proctree import cpu_seconds, tree

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CLI = str(Path(PY).parent / "changefeed")
TABLE = "CREATE TABLE t (k Uint64, a Utf8, b Int64, c Double, PRIMARY KEY (k)) WITH (UNIFORM_PARTITIONS = 4)"
UPSERT = "UPSERT INTO t (k, a, b, c) VALUES (?, ?, ?, ?)"


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    e["PYSPARK_PYTHON"] = PY
    e["PYSPARK_DRIVER_PYTHON"] = PY
    e["PYTHONPATH"] = str(ROOT / "src")
    return e


def create(dst: Path, src: Path, mode: str, interval: str) -> None:
    mode = "ROW" if mode == "WARM" else mode
    c = changefeed.connect(dst)
    extra = f", COMMIT_INTERVAL = Interval('{interval}')" if mode == "GLOBAL" else ""
    c.execute(
        f"CREATE ASYNC REPLICATION r FOR t AS t_r WITH (CONNECTION_STRING = 'file://{src}',"
        f" CONSISTENCY_LEVEL = '{mode}'{extra})"
    )
    c.close()


def build(root: Path, rows: int, mode: str, interval: str, every: int) -> tuple[Path, Path]:
    """Source with ``rows`` changes in the replication's changefeed topics; empty replica. The
    changes are delivered as a continuous pipeline would: every ``every`` rows a delivery, one
    interval apart (so a GLOBAL replication's topics carry a barrier after each)."""
    from changefeed.pipeline import baseline

    src, dst = root / f"src-{mode}", root / f"dst-{mode}"
    s = changefeed.connect(src)
    s.execute(TABLE)
    create(dst, src, mode, interval)
    feed = _item(dst).changefeed
    t0 = time.perf_counter()
    for start in range(0, rows, every):
        for lo in range(start, min(rows, start + every), 10_000):
            s.executemany(
                UPSERT,
                [(i, f"name-{i}", i * 3, i * 0.5) for i in range(lo, min(rows, lo + 10_000, start + every))],
            )
        time.sleep(_seconds(interval) + 0.05)  # a barrier closes after these changes
        baseline.deliver(src, feed)
    s.close()
    print(f"  {mode}: built {rows:,} changes and delivered them in {time.perf_counter() - t0:.1f} s")
    return src, dst


def _seconds(interval: str) -> float:
    """Seconds of a ``PT<n>S`` interval (the form this benchmark takes)."""
    if not (interval.startswith("PT") and interval.endswith("S")):
        raise SystemExit(f"--interval takes PT<seconds>S, got {interval!r}")
    return float(interval[2:-1])


def _item(dst: Path) -> Any:
    from changefeed.feeds import replication as R

    c = changefeed.connect(dst)
    rep = R.find(c.db.conn, "r")
    c.close()
    assert rep is not None
    return rep.items[0]


def applied(dst: Path) -> int:
    from changefeed.feeds import replication as R

    c = changefeed.connect(dst)
    try:
        rep = R.find(c.db.conn, "r")
        return rep.applied_rows if rep is not None else 0
    finally:
        c.close()


def spark_apply(dst: Path, rows: int, batch: int) -> dict[str, float]:
    """Timed run of the Spark apply query over the delivered backlog."""
    from changefeed.feeds import replication as R
    from changefeed.pipeline.replication import query as Q
    from changefeed.pipeline.spark.session import get_spark

    spark = get_spark("replication-bench")
    c = changefeed.connect(dst)
    rep = R.find(c.db.conn, "r")
    c.close()
    assert rep is not None
    spans: list[tuple[float, float]] = []
    call = Q.ApplyBatches.__call__

    def timed(self: Any, df: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        call(self, df, batch_id)
        spans.append((t0, time.perf_counter()))

    Q.ApplyBatches.__call__ = timed  # type: ignore[method-assign]
    try:
        cpu0 = cpu_seconds(tree(os.getpid()))
        query, sink = Q.start_replication_query(spark, dst, rep.id, available_now=True, max_records=batch)
        query.awaitTermination()
        cpu = cpu_seconds(tree(os.getpid())) - cpu0
        sink.close()
    finally:
        Q.ApplyBatches.__call__ = call  # type: ignore[method-assign]
    got = applied(dst)
    assert got == rows, (got, rows)
    took = spans[-1][1] - spans[0][0]
    inside = sum(b - a for a, b in spans)
    return {
        "rows": got,
        "seconds": took,
        "rate": got / took,
        "cpu_rate": got / cpu,
        "batches": len(spans),
        "inside": inside / took,
    }


def applier_alone(root: Path, src: Path, mode: str, interval: str, rows: int, batch: int) -> dict[str, float]:
    """The Applier on the same records, without Spark, into a fresh replica."""
    from changefeed.feeds import replication as R
    from changefeed.pipeline.replication.apply import Applier
    from changefeed.topics import TopicStore

    dst = root / f"dst-{mode}-alone"
    create(dst, src, mode, interval)
    c = changefeed.connect(dst)
    rep = R.find(c.db.conn, "r")
    assert rep is not None
    item = _item(root / f"dst-{mode}")  # the records delivered for the Spark run: same source topic
    st = TopicStore(src)
    cols: list[list[Any]] = [[], [], [], [], []]
    own = rep.items[0]
    for p in range(item.partitions):
        t = st.read_arrow(item.topic, p, 0)
        n = t.num_rows
        cols[0] += [own.item_id] * n
        cols[1] += [p] * n
        cols[2] += t.column("offset").to_pylist()
        cols[3] += t.column("ts").to_pylist()
        cols[4] += t.column("value").to_pylist()
    # this replica's positions start where the other's did (offset 0)
    ap = Applier(c.db, rep.id)
    order = sorted(range(len(cols[0])), key=lambda i: (cols[2][i], cols[1][i]))  # interleave partitions
    cols = [[col[i] for i in order] for col in cols]
    t0, c0 = time.perf_counter(), time.process_time()
    done = 0
    for lo in range(0, len(order), batch):
        res = ap.apply_columns(*(col[lo : lo + batch] for col in cols))
        done += res.applied
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    c.close()
    assert done == rows, (done, rows)
    return {"rows": done, "seconds": took, "rate": done / took, "cpu_rate": done / cpu}


def lag(root: Path, seconds: float, rate: int, interval: str) -> dict[str, float]:
    """GLOBAL lag under a continuous ``changefeed run`` at ``rate`` rows/s."""
    src, dst = root / "lag-src", root / "lag-dst"
    s = changefeed.connect(src)
    s.execute(TABLE)
    s.close()
    create(dst, src, "GLOBAL", interval)
    log = open(root / "run.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [CLI, "run", "--db", str(dst)],
        env=env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    stop = threading.Event()
    written = [0]

    def writer() -> None:
        s = changefeed.connect(src)
        tick, k = 0.05, 0
        per = max(1, int(rate * tick))
        nxt = time.monotonic()
        while not stop.is_set():
            now = time.time_ns()
            s.executemany(UPSERT, [(k + i, "x", now, 0.0) for i in range(per)])
            k += per
            written[0] = k
            nxt += tick
            time.sleep(max(0.0, nxt - time.monotonic()))
        s.close()

    r = changefeed.connect(dst)

    probe = 1 << 62

    def probed() -> bool:
        return bool(r.execute("SELECT b FROM t_r WHERE k = ?", (probe,)).rows)

    def barrier() -> int:
        """The barrier applied: the replica equals the source as of it."""
        from changefeed.feeds import replication as R

        rep = R.find(r.db.conn, "r")
        return rep.applied_wall if rep is not None else 0

    samples: list[float] = []
    try:
        # warm-up: one probe row, until the replica has it (the session started, the initial scan
        # is done, barriers flow); then the steady writer, and two intervals before sampling
        p = changefeed.connect(src)
        p.execute(UPSERT, (probe, "probe", time.time_ns(), 0.0))
        p.close()
        t0 = time.monotonic()
        while not probed():
            if time.monotonic() - t0 > 900 or proc.poll() is not None:
                raise RuntimeError(f"the replication did not start; see {root / 'run.log'}")
            time.sleep(0.2)
        print(f"  lag: the probe row reached the replica after {time.monotonic() - t0:.1f} s (warm-up)")
        w = threading.Thread(target=writer, daemon=True)
        w.start()
        time.sleep(2 * _seconds(interval) + 5)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            b = barrier()
            if b:
                samples.append((time.time_ns() - b) / 1e9)
            time.sleep(0.025)
    finally:
        stop.set()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        r.close()
    samples.sort()
    return {
        "samples": len(samples),
        "p50": statistics.median(samples),
        "p99": samples[int(0.99 * (len(samples) - 1))],
        "max": samples[-1],
        "written": written[0],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=300_000)
    p.add_argument("--batch", type=int, default=50_000, help="records per micro-batch / Applier call")
    p.add_argument(
        "--barrier-every", type=int, default=25_000, help="rows between deliveries (barriers) of the backlog"
    )
    p.add_argument("--apply-interval", default="PT1S", help="COMMIT_INTERVAL of the GLOBAL throughput run")
    p.add_argument("--lag-seconds", type=float, default=60.0)
    p.add_argument("--rate", type=int, default=5000)
    p.add_argument(
        "--interval",
        default="PT10S",
        help="COMMIT_INTERVAL of the GLOBAL replications (PT<seconds>S; YDB's default)",
    )
    p.add_argument("--dir", type=Path, default=None)
    p.add_argument("--skip-apply", action="store_true")
    p.add_argument("--skip-lag", action="store_true")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(dir=args.dir, prefix="replication-bench-"))
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    try:
        if not args.skip_apply:
            from changefeed.pipeline.replication import query as Q

            rates: dict[str, dict[str, float]] = {}
            # warm-up (JVM, Python workers, imports): a small replication, not reported
            _, warm = build(root, min(args.rows, 20_000), "WARM", args.apply_interval, args.barrier_every)
            spark_apply(warm, min(args.rows, 20_000), args.batch)
            for mode in ("ROW", "GLOBAL"):
                src, dst = build(root, args.rows, mode, args.apply_interval, args.barrier_every)
                sp = spark_apply(dst, args.rows, args.batch)
                alone = applier_alone(root, src, mode, args.apply_interval, args.rows, args.batch)
                rates[mode] = sp
                print(
                    f"{mode}: Spark apply {sp['rows']:,} rows in {sp['seconds']:.2f} s = {sp['rate']:,.0f} rows/s"
                    f" ({sp['batches']:.0f} micro-batches, records read on the {Q.READ}, {sp['inside']:.0%} of the time in foreachBatch;"
                    f" {sp['cpu_rate']:,.0f} rows per CPU second of the tree);"
                    f" the Applier alone {alone['rate']:,.0f} rows/s ({alone['cpu_rate']:,.0f} per CPU second);"
                    f" load average {os.getloadavg()[0]:.1f}"
                )
            row, glob = rates["ROW"], rates["GLOBAL"]
            print(
                f"ROW {row['rate']:,.0f} rows/s (target 50,000: {row['rate'] / 50_000:.2f});"
                f" GLOBAL/ROW {glob['rate'] / row['rate']:.2f} (target 0.7);"
                f" per CPU second ROW {row['cpu_rate']:,.0f}, GLOBAL/ROW {glob['cpu_rate'] / row['cpu_rate']:.2f}"
            )
        if not args.skip_lag:
            got = lag(root, args.lag_seconds, args.rate, args.interval)
            bound = 2 * _seconds(args.interval)
            print(
                f"GLOBAL lag at {args.rate:,} rows/s, COMMIT_INTERVAL {args.interval}: p50 {got['p50']:.2f} s,"
                f" p99 {got['p99']:.2f} s (target {bound:.1f} s), max {got['max']:.2f} s over {got['samples']:,}"
                f" samples; {got['written']:,} rows written; load average {os.getloadavg()[0]:.1f}"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
