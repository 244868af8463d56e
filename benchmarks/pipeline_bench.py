"""End-to-end pipeline figures, side by side: single-process baseline vs the Spark job.

    .venv/bin/python benchmarks/pipeline_bench.py [--rows 1000000] [--latency-seconds 20] [--skip-spark]

(a) baseline loop rows/s (``changefeed.pipeline.baseline.deliver`` in a child process);
(b) Spark ``changefeed run --until-idle`` rows/s over the delivery phase only (from the first record
    appearing in the topic to the last; session start excluded), the ratio Spark/baseline;
(c) commit-to-topic latency p50/p99 at a steady 5,000 rows/s with a continuous ``changefeed run``;
(d) initial scan of an N-row table, rows/s (baseline and Spark);
peak RSS of every process involved (/proc/<pid>/status VmHWM / summed VmRSS of the process tree,
and getrusage(RUSAGE_CHILDREN) for the baseline child).

The journal is built through the engine API: ``executemany`` of UPSERTs of distinct keys in
50,000-row transactions (one change row per key), table ``t (k Uint64, a Utf8, b Int64, c Double)``
with a YDB changefeed (JSON, NEW_AND_OLD_IMAGES, VIRTUAL_TIMESTAMPS, 4 topic partitions).
Parts needing the Spark pipeline are skipped with a message while it (or its encoders) is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from proctree import TreeMemory

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
CLI = str(Path(PY).parent / "changefeed")
FEED = (
    "FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES', VIRTUAL_TIMESTAMPS = TRUE, TOPIC_MIN_ACTIVE_PARTITIONS = 4"
)


def encoders_ready() -> bool:
    try:
        from changefeed.formats import debezium, ydb_json  # noqa: F401
    except ImportError:
        return False
    return True


def spark_missing() -> str | None:
    if not (ROOT / "src/changefeed/cli/run_cmd.py").exists():
        return "changefeed run (src/changefeed/cli/run_cmd.py) does not exist yet"
    if not encoders_ready():
        return "the encoders (changefeed.formats.ydb_json / debezium) are not in the tree yet"
    return None


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    e["PYSPARK_PYTHON"] = PY
    e["PYSPARK_DRIVER_PYTHON"] = PY
    return e


# ------------------------------------------------------------------------------------ building
def build(db: Path, rows: int, *, feed_first: bool = True, scan: bool = False, chunk: int = 50_000) -> float:
    import changefeed

    t0 = time.perf_counter()
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (k Uint64, a Utf8, b Int64, c Double, PRIMARY KEY (k))")
        if feed_first:
            conn.execute(f"ALTER TABLE t ADD CHANGEFEED f WITH ({FEED})")
        for lo in range(0, rows, chunk):
            conn.executemany(
                "UPSERT INTO t (k, a, b, c) VALUES (?, ?, ?, ?)",
                ((k, f"name-{k}", k * 7 % 1000, k / 4.0) for k in range(lo, min(rows, lo + chunk))),
            )
        if not feed_first:
            conn.execute(
                f"ALTER TABLE t ADD CHANGEFEED f WITH ({FEED}{', INITIAL_SCAN = TRUE' if scan else ''})"
            )
    return time.perf_counter() - t0


def topic_count(db: Path, topic: str = "t/f") -> int:
    from changefeed.topics import TopicStore

    try:
        store = TopicStore(db)
        n = sum(nxt for _, nxt in store.offsets(topic).values())
        store.close()
        return n
    except Exception:
        return 0


# ------------------------------------------------------------------------------------ runners
def run_baseline(db: Path) -> dict[str, Any]:
    code = (
        "import json, time; from changefeed.pipeline.baseline import deliver; t = time.perf_counter(); "
        + f"n = deliver({str(db)!r}, 'f'); print(json.dumps({{'records': n, 'seconds': time.perf_counter() - t}}))"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env(), check=True)
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    res["rss_gb"] = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024 / 1024
    return res


def run_spark_until_idle(db: Path, expect: int) -> dict[str, Any]:
    """Wall time of the whole run, and of the delivery phase (first record seen -> last)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [CLI, "run", "--db", str(db), "--until-idle"],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    mem = TreeMemory(proc.pid)
    mem.start()
    first = last = None
    n = 0
    while proc.poll() is None:
        n = topic_count(db)
        now = time.perf_counter()
        if n and first is None:
            first = (now, n)
        if n >= expect and last is None:
            last = now
        time.sleep(0.05)
    n = topic_count(db)
    end = time.perf_counter()
    mem.stop.set()
    mem.join()
    out = proc.stdout.read().decode() if proc.stdout else ""
    if proc.returncode != 0:
        raise RuntimeError(f"changefeed run failed ({proc.returncode}):\n{out[-3000:]}")
    last = last or end
    if first is None:
        first = (end, 0)
    delivery = max(last - first[0], 1e-9)
    # records that arrived in the first observed batch are credited at the rate of the rest
    rate = (n - first[1]) / delivery if n > first[1] else n / (end - t0)
    return {"records": n, "wall": end - t0, "delivery_s": delivery, "rate": rate, "rss_gb": mem.peak_gb}


def latency(seconds: float, rate: int = 5000, tick: float = 0.05) -> dict[str, Any]:
    import changefeed
    from changefeed.topics import TopicStore

    d = Path(tempfile.mkdtemp(prefix="cf-lat-"))
    db = d / "db"
    try:
        build(db, 0)
        proc = subprocess.Popen(
            [CLI, "run", "--db", str(db)], env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        mem = TreeMemory(proc.pid)
        mem.start()
        store = TopicStore(db)
        lat: list[float] = []
        nxt = {p: 0 for p in range(4)}

        def drain() -> int:
            got = 0
            for p in range(4):
                for r in store.read("t/f", p, nxt[p], 100_000):
                    lat.append((time.time_ns() - r.ts) / 1e9)
                    nxt[p] = r.offset + 1
                    got += 1
            return got

        conn = changefeed.connect(db)
        k = 0
        # warm-up: wait until the pipeline delivers a probe row (Spark start excluded)
        conn.execute("UPSERT INTO t (k, a) VALUES (?, 'probe')", (10**12,))
        deadline = time.monotonic() + float(os.environ.get("CF_BENCH_WARMUP", "60"))
        while drain() == 0:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(
                    "continuous changefeed run delivered nothing within the warm-up (CF_BENCH_WARMUP s)"
                )
            time.sleep(0.05)
        lat.clear()
        per_tick = int(rate * tick)
        stop = threading.Event()

        def consumer() -> None:
            while not stop.is_set():
                if drain() == 0:
                    time.sleep(0.01)

        th = threading.Thread(target=consumer, daemon=True)
        th.start()
        t_start = time.monotonic()
        i = 0
        while time.monotonic() - t_start < seconds:
            conn.executemany(
                "UPSERT INTO t (k, a, b) VALUES (?, ?, ?)", [(k + j, "x", j) for j in range(per_tick)]
            )
            k += per_tick
            i += 1
            sleep = t_start + i * tick - time.monotonic()
            if sleep > 0:
                time.sleep(sleep)
        written = k
        deadline = time.monotonic() + 30
        while len(lat) < written and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        th.join()
        proc.kill()
        proc.wait()
        mem.stop.set()
        conn.close()
        lat.sort()
        return {
            "written": written,
            "delivered": len(lat),
            "achieved_rate": written / seconds,
            "p50": lat[len(lat) // 2] if lat else float("nan"),
            "p99": lat[int(len(lat) * 0.99)] if lat else float("nan"),
            "rss_gb": mem.peak_gb,
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------------------ report
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument(
        "--scan-rows", type=int, default=None, help="rows of the initial-scan table (default --rows)"
    )
    ap.add_argument("--latency-seconds", type=float, default=20.0)
    ap.add_argument("--skip-spark", action="store_true")
    args = ap.parse_args()
    n = args.rows
    scan_n = args.scan_rows or n
    missing = "--skip-spark given" if args.skip_spark else spark_missing()
    work = Path(tempfile.mkdtemp(prefix="cf-bench-"))
    fig: list[tuple[str, str, str]] = []
    try:
        t = build(work / "base", n)
        print(f"built {n} journal rows in {t:.1f} s ({n / t:,.0f} rows/s via executemany)", file=sys.stderr)
        shutil.copytree(work / "base", work / "spark")
        b = run_baseline(work / "base")
        b_rate = b["records"] / b["seconds"]
        fig.append(
            ("(a) baseline loop", f"{b_rate:,.0f} rows/s ({b['records']:,} in {b['seconds']:.1f} s)", "-")
        )
        fig.append(("    baseline peak RSS", f"{b['rss_gb']:.2f} GB", "<= 3 GB"))
        if missing is None:
            s = run_spark_until_idle(work / "spark", n)
            fig.append(
                (
                    "(b) Spark run --until-idle",
                    f"{s['rate']:,.0f} rows/s (delivery {s['delivery_s']:.1f} s, wall {s['wall']:.1f} s)",
                    ">= 60,000 rows/s",
                )
            )
            fig.append(("    Spark/baseline", f"{s['rate'] / b_rate:.2f}", ">= 0.6"))
            fig.append(("    Spark peak RSS (tree)", f"{s['rss_gb']:.2f} GB", "<= 3 GB"))
        else:
            fig.append(("(b) Spark run --until-idle", f"skipped: {missing}", ">= 60,000 rows/s"))
        shutil.rmtree(work / "spark", ignore_errors=True)
        lt: dict[str, Any] | None = None
        if missing is None:
            try:
                lt = latency(args.latency_seconds)
            except Exception as exc:  # report and go on to the other figures
                fig.append(("(c) latency @5k rows/s", f"failed: {exc}", "p50 <= 1 s, p99 <= 2 s"))
        if lt is not None:
            fig.append(
                (
                    "(c) latency p50 @5k rows/s",
                    f"{lt['p50']:.3f} s ({lt['delivered']:,}/{lt['written']:,} rows, {lt['achieved_rate']:,.0f} rows/s)",
                    "<= 1 s",
                )
            )
            fig.append(("    latency p99", f"{lt['p99']:.3f} s", "<= 2 s"))
            fig.append(("    peak RSS (tree)", f"{lt['rss_gb']:.2f} GB", "<= 3 GB"))
        elif missing is not None:
            fig.append(("(c) latency @5k rows/s", f"skipped: {missing}", "p50 <= 1 s, p99 <= 2 s"))
        build(work / "scan", scan_n, feed_first=False, scan=True)
        shutil.copytree(work / "scan", work / "scan-spark")
        sb = run_baseline(work / "scan")
        fig.append(
            (
                "(d) initial scan, baseline",
                f"{sb['records'] / sb['seconds']:,.0f} rows/s ({sb['records']:,} rows)",
                ">= 100,000 rows/s",
            )
        )
        if missing is None:
            ss = run_spark_until_idle(work / "scan-spark", scan_n)
            fig.append(
                (
                    "(d) initial scan, Spark",
                    f"{ss['rate']:,.0f} rows/s (wall {ss['wall']:.1f} s)",
                    ">= 100,000 rows/s",
                )
            )
        else:
            fig.append(("(d) initial scan, Spark", f"skipped: {missing}", ">= 100,000 rows/s"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    w1 = max(len(a) for a, _, _ in fig)
    w2 = max(len(b) for _, b, _ in fig)
    print(
        f"\npipeline benchmark: {n:,} journal rows, {os.cpu_count()} cores, Python {sys.version.split()[0]}"
    )
    print(f"{'figure':<{w1}}  {'measured':<{w2}}  target")
    for a, b2, c in fig:
        print(f"{a:<{w1}}  {b2:<{w2}}  {c}")
    _ = statistics
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
