"""A running node (``changefeed start``) measured as a user meets it: issue 16's figures.

    python benchmarks/node_bench.py latency [--rate 5000] [--seconds 20]
    python benchmarks/node_bench.py first-record
    python benchmarks/node_bench.py slow [--rate 1] [--seconds 30]
    python benchmarks/node_bench.py idle [--feeds 10] [--seconds 60]
    python benchmarks/node_bench.py cold
    python benchmarks/node_bench.py metrics [--feeds 100]
    python benchmarks/node_bench.py all

* ``latency``: rows written through the node's pg endpoint (psycopg, 50-row transactions) at
  ``--rate`` rows/s into a table with a YDB changefeed and a CockroachDB job ``INTO 'topics://'``;
  a confluent-kafka consumer of the node's Kafka endpoint; commit (the record's timestamp, the
  commit clock in ms) to consumed, p50/p99 per feed. Target: p99 <= 0.5 s at 5,000 rows/s.
* ``first-record``: on a running node, ``CREATE CHANGEFEED`` then one row: seconds from the
  CREATE to the first record at the consumer. Target <= 3 s.
* ``slow``: ``latency`` at 1 row/s. Target p99 <= 1 s.
* ``idle``: a node with ``--feeds`` feeds (half YDB feeds, half jobs) and nothing written: CPU
  of its process tree (the JVM included) over ``--seconds`` as a share of one core, after the
  Spark session has warmed; and the tree's RSS. Targets <= 3 % and <= 2.5 GB.
* ``cold``: ``changefeed demo`` then ``changefeed run --until-idle`` in a fresh process: wall and
  the process tree's CPU seconds; the baseline is the same run forced onto Spark
  (``CHANGEFEED_DRIVER_ENCODE_ROWS=0``, ``CHANGEFEED_DRIVER_SCAN_ROWS=0``: every batch and scan
  a Spark job, what ``run`` did before the driver path). Targets <= 12 s and <= 15 CPU-s.
* ``metrics``: ``GET /metrics`` of a node with ``--feeds`` feeds: median and max of 20 scrapes.
  Target <= 50 ms. Also the status read per feed (``feeds.status.statuses``, what ``changefeed
  feeds`` and ``SHOW CHANGEFEED JOBS`` read). Target <= 5 ms.

Each prints its figures, the target, the load average and the core count.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.node_process import PY, NodeProcess, node_env

from proctree import cpu_seconds, status_kb, tree


def _env_line() -> str:
    return f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}"


def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _consumer(node: NodeProcess, topics: list[str]) -> Any:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": node.kafka,
            "group.id": f"bench{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
            "fetch.wait.max.ms": 10,
            "log_level": 3,
        }
    )
    parts = []
    for t in topics:
        meta = c.list_topics(t, timeout=30).topics[t]
        for p in meta.partitions:
            parts.append(TopicPartition(t, p, -1))  # the end: only what is written from now
    c.assign(parts)
    return c


def _setup(node: NodeProcess, table: str = "t", job: bool = True) -> None:
    import psycopg

    with psycopg.connect(node.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table} (k Uint64, a Utf8, b Int64, PRIMARY KEY (k))")
        conn.execute(f"ALTER TABLE {table} ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
        if job:
            conn.execute(f"CREATE CHANGEFEED FOR TABLE {table} INTO 'topics://?topic_prefix=j_' WITH updated")


def _wait_topics(node: NodeProcess, topics: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    a = AdminClient({"bootstrap.servers": node.kafka, "log_level": 3})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        have = a.list_topics(timeout=10).topics
        if all(t in have for t in topics):
            return
        time.sleep(0.1)
    raise SystemExit(f"topics {topics} did not appear")


def latency(rate: float, seconds: float) -> dict[str, Any]:
    import psycopg

    tmp = Path(tempfile.mkdtemp())
    node = NodeProcess(tmp / "db", tmp / "node.log")
    node.start()
    try:
        _setup(node)
        topics = ["t/f", "j_t"]
        _wait_topics(node, topics)
        time.sleep(15 if rate > 100 else 3)  # let the background Spark warm-up finish first
        c = _consumer(node, topics)
        lat: dict[str, list[float]] = {t: [] for t in topics}
        stop = threading.Event()

        def consume() -> None:
            while not stop.is_set():
                for m in c.consume(1000, timeout=0.05):
                    if m.error() is None and m.key() is not None:
                        lat[m.topic()].append(time.time() - m.timestamp()[1] / 1000)

        th = threading.Thread(target=consume, daemon=True)
        th.start()
        per_txn = 50 if rate >= 100 else 1
        interval = per_txn / rate
        k = 0
        with psycopg.connect(node.dsn(), autocommit=True) as conn:
            t0 = time.monotonic()
            nxt = t0
            while time.monotonic() - t0 < seconds:
                with conn.transaction(), conn.cursor() as cur:
                    cur.executemany(
                        "UPSERT INTO t (k, a, b) VALUES (%s, %s, %s)",
                        [(k + i, "x", i) for i in range(per_txn)],
                    )
                k += per_txn
                nxt += interval
                delay = nxt - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            wrote_s = time.monotonic() - t0
        time.sleep(3)
        stop.set()
        th.join(10)
        c.close()
        out: dict[str, Any] = {"rows": k, "achieved_rate": round(k / wrote_s, 1)}
        for t, xs in lat.items():
            out[t] = {
                "received": len(xs),
                "p50_s": round(_pct(xs, 0.5), 3),
                "p99_s": round(_pct(xs, 0.99), 3),
            }
        return out
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def first_record() -> dict[str, Any]:
    import psycopg

    tmp = Path(tempfile.mkdtemp())
    node = NodeProcess(tmp / "db", tmp / "node.log")
    node.start()
    try:
        with psycopg.connect(node.dsn(), autocommit=True) as conn:
            conn.execute("CREATE TABLE t (k Uint64, a Utf8, b Int64, PRIMARY KEY (k))")
            conn.execute("UPSERT INTO t (k, a, b) VALUES (0, 'before', 0)")
            time.sleep(20)  # a running node: its Spark session warmed
            t0 = time.monotonic()
            conn.execute("CREATE CHANGEFEED FOR TABLE t INTO 'topics://' WITH updated")
            conn.execute("UPSERT INTO t (k, a, b) VALUES (1, 'after', 1)")
            from confluent_kafka import Consumer, TopicPartition

            c = Consumer(
                {
                    "bootstrap.servers": node.kafka,
                    "group.id": "first",
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 10,
                    "log_level": 3,
                }
            )
            got = None
            while time.monotonic() - t0 < 60 and got is None:
                try:
                    meta = c.list_topics("t", timeout=1).topics["t"]
                    if meta.error is None:
                        c.assign([TopicPartition("t", p, 0) for p in meta.partitions])
                        for m in c.consume(10, timeout=0.05):
                            if m.error() is None:
                                got = time.monotonic() - t0
                                break
                except Exception:
                    time.sleep(0.02)
            c.close()
        return {"create_to_first_record_s": None if got is None else round(got, 3)}
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def idle(feeds: int, seconds: float) -> dict[str, Any]:
    import psycopg

    tmp = Path(tempfile.mkdtemp())
    node = NodeProcess(tmp / "db", tmp / "node.log")
    node.start()
    try:
        with psycopg.connect(node.dsn(), autocommit=True) as conn:
            for i in range(feeds):
                conn.execute(f"CREATE TABLE t{i} (k Uint64, a Utf8, PRIMARY KEY (k))")
                conn.execute(f"UPSERT INTO t{i} (k, a) VALUES (1, 'x')")
                if i % 2:
                    conn.execute(f"CREATE CHANGEFEED FOR TABLE t{i} INTO 'topics://' WITH resolved = '10s'")
                else:
                    conn.execute(
                        f"ALTER TABLE t{i} ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')"
                    )
        assert node.proc is not None
        pid = node.proc.pid
        # settle: the Spark session warms in the background (JVM start, JIT); measure once a
        # 5 s window of the whole tree uses under 10 % of a core (at most 240 s)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            a = cpu_seconds(tree(pid))
            time.sleep(5)
            if cpu_seconds(tree(pid)) - a < 0.5 and len(tree(pid)) > 2:
                break
        c0, t0 = cpu_seconds(tree(pid)), time.monotonic()
        peak = 0
        while time.monotonic() - t0 < seconds:
            peak = max(peak, sum(status_kb(p, "VmRSS") for p in tree(pid)))
            time.sleep(1)
        c1, t1 = cpu_seconds(tree(pid)), time.monotonic()
        return {
            "feeds": feeds,
            "cpu_share_of_one_core_pct": round(100 * (c1 - c0) / (t1 - t0), 2),
            "tree_rss_gb": round(peak / 1024 / 1024, 3),
            "members": len(tree(pid)),
        }
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _cold_once(env_extra: dict[str, str]) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp())
    try:
        env = {**node_env(), **env_extra}
        subprocess.run(
            [PY, "-m", "changefeed.cli.main", "demo", "--db", str(tmp / "db")],
            env=env,
            check=True,
            capture_output=True,
        )
        t0 = time.monotonic()
        p = subprocess.Popen(
            [PY, "-m", "changefeed.cli.main", "run", "--db", str(tmp / "db"), "--until-idle"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        cpu = 0.0
        while p.poll() is None:
            cpu = max(cpu, cpu_seconds(tree(p.pid)))
            time.sleep(0.05)
        wall = time.monotonic() - t0
        # the reaped children's CPU is in the parent's cutime/cstime; the parent is gone: use
        # resource usage of our own children as the exact figure
        return {"wall_s": round(wall, 2), "cpu_s_sampled": round(cpu, 2), "rc": float(p.returncode)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cold() -> dict[str, Any]:
    import resource

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    driver = _cold_once({})
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    spark = _cold_once({"CHANGEFEED_DRIVER_ENCODE_ROWS": "0", "CHANGEFEED_DRIVER_SCAN_ROWS": "0"})
    r2 = resource.getrusage(resource.RUSAGE_CHILDREN)

    def cpu(a: Any, b: Any) -> float:
        return round((b.ru_utime - a.ru_utime) + (b.ru_stime - a.ru_stime), 2)

    driver["cpu_s"], spark["cpu_s"] = cpu(r0, r1), cpu(r1, r2)
    return {
        "driver_path": driver,
        "spark_baseline": spark,
        "wall_ratio": round(driver["wall_s"] / spark["wall_s"], 3),
        "cpu_ratio": round(driver["cpu_s"] / max(spark["cpu_s"], 1e-9), 3),
    }


def metrics(feeds: int) -> dict[str, Any]:
    import changefeed

    tmp = Path(tempfile.mkdtemp())
    db = tmp / "db"
    with changefeed.connect(db) as conn:
        for i in range(feeds):
            conn.execute(f"CREATE TABLE t{i} (k Uint64, a Utf8, PRIMARY KEY (k))")
            conn.execute(f"ALTER TABLE t{i} ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
            conn.execute(f"UPSERT INTO t{i} (k, a) VALUES (1, 'x')")
    from changefeed.engine.database import DB_FILE, open_sqlite
    from changefeed.feeds.status import statuses

    conn = open_sqlite(db / DB_FILE, readonly=True)
    try:  # what `changefeed feeds`, SHOW CHANGEFEED JOBS and /metrics read (issue 21: <= 5 ms a feed)
        statuses(conn, db, time.time_ns())
        t0 = time.perf_counter()
        got = statuses(conn, db, time.time_ns())
        status_ms = (time.perf_counter() - t0) * 1000 / max(1, len(got))
    finally:
        conn.close()
    node = NodeProcess(db, tmp / "node.log")
    node.start()
    try:
        times = []
        with httpx.Client() as client:
            client.get(node.http + "/metrics")
            for _ in range(20):
                t0 = time.perf_counter()
                r = client.get(node.http + "/metrics")
                times.append(time.perf_counter() - t0)
                assert r.status_code == 200
        return {
            "feeds": feeds,
            "median_ms": round(statistics.median(times) * 1000, 1),
            "max_ms": round(max(times) * 1000, 1),
            "status_ms_per_feed": round(status_ms, 3),
        }
    finally:
        node.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["latency", "first-record", "slow", "idle", "cold", "metrics", "all"])
    ap.add_argument("--rate", type=float, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--feeds", type=int, default=None)
    a = ap.parse_args()
    runs: list[tuple[str, Any, str]] = []
    w = a.what
    if w in ("latency", "all"):
        runs.append(("latency", lambda: latency(a.rate or 5000, a.seconds or 20), "p99 <= 0.5 s per feed"))
    if w in ("first-record", "all"):
        runs.append(("first-record", first_record, "<= 3 s"))
    if w in ("slow", "all"):
        runs.append(("slow", lambda: latency(a.rate or 1, a.seconds or 30), "p99 <= 1 s per feed"))
    if w in ("idle", "all"):
        runs.append(("idle", lambda: idle(a.feeds or 10, a.seconds or 60), "<= 3 % of one core, <= 2.5 GB"))
    if w in ("cold", "all"):
        runs.append(("cold", cold, "wall <= 12 s, <= 15 CPU-s"))
    if w in ("metrics", "all"):
        runs.append(("metrics", lambda: metrics(a.feeds or 100), "<= 50 ms"))
    for name, fn, target in runs:
        before = _env_line()
        got = fn()
        print(f"{name}: {got}  (target {target}; {before} -> {_env_line()})", flush=True)


if __name__ == "__main__":
    main()
