"""A schema-change backfill of a CockroachDB changefeed job on Spark.

    .venv/bin/python benchmarks/backfill_bench.py [--rows 1000000] [--policy backfill|nobackfill]

Builds ``t (k INT PRIMARY KEY, a STRING, b INT, c FLOAT)`` with N rows (4 partitions), creates
``CREATE CHANGEFEED FOR t INTO 'topics://' WITH updated, no_initial_scan, schema_change_policy =
<policy>``, delivers once (nothing to deliver: warms the Spark session and starts the feed's
checkpoint), then runs ``ALTER TABLE t ADD COLUMN d INT DEFAULT 7`` and times the
``run_until_idle`` that delivers the backfill: with ``backfill`` every row once in the old schema
(CockroachDB's duplicates) and once in the new one (2 N messages), with ``nobackfill`` only the
duplicates (N messages). Each pass is a consistent scan of the table at the change on Spark,
encoded on Spark and appended by topic partition on the executors (``pipeline/snapshot/backfill.py``).

``--no-float`` leaves the FLOAT column out: CockroachDB's float rendering is the costliest part
of the encoder's Spark face, so this shows the backfill's own path. Prints the table rows backfilled per second (N / time of the run; target >= 100,000 rows/s for
1,000,000 rows, issue 7), the messages per second, and the fixed cost of an empty run (query
start-up and commit), measured the same way just before.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TARGET = 100_000


def build(db: Path, rows: int, policy: str, chunk: int = 100_000, floats: bool = True) -> None:
    import changefeed

    with changefeed.connect(db) as conn:
        conn.execute(
            f"CREATE TABLE t (k INT PRIMARY KEY, a STRING, b INT{', c FLOAT' if floats else ''})"
            " WITH (uniform_partitions = 4)"
        )
        for lo in range(0, rows, chunk):
            keys = range(lo, min(rows, lo + chunk))
            if floats:
                sql = "INSERT INTO t VALUES (?, ?, ?, ?)"
                values: Iterable[tuple[Any, ...]] = ((k, f"name-{k}", k * 7 % 1000, k / 4.0) for k in keys)
            else:
                sql, values = "INSERT INTO t VALUES (?, ?, ?)", ((k, f"name-{k}", k * 7 % 1000) for k in keys)
            conn.executemany(sql, values)
        conn.execute(
            "CREATE CHANGEFEED FOR t INTO 'topics://' WITH updated, no_initial_scan, "
            f"schema_change_policy = '{policy}'"
        )


def count(db: Path, topic: str) -> int:
    from changefeed.topics import TopicStore

    store = TopicStore(db)
    return sum(hi - lo for lo, hi in store.offsets(topic).values())


def _running(db: Path, spark: Any, expect: int) -> tuple[float, float]:
    """(seconds from the ALTER's commit until ``expect`` messages are in the topic, seconds the
    ALTER took) under a running query (``run_forever`` in a thread, as ``changefeed run``)."""
    import threading

    import changefeed
    from changefeed.pipeline.runner import run_forever

    stop = threading.Event()
    runner = threading.Thread(
        target=run_forever, args=(db,), kwargs={"spark": spark, "stop": stop, "install_signals": False}
    )
    runner.start()
    try:
        time.sleep(8.0)  # the query is up and idle
        with changefeed.connect(db) as conn:
            t0 = time.perf_counter()
            conn.execute("ALTER TABLE t ADD COLUMN d INT DEFAULT 7")
            alter = time.perf_counter() - t0
        t0 = time.perf_counter()
        deadline = time.monotonic() + 3600
        while count(db, "t") < expect and time.monotonic() < deadline:
            time.sleep(0.05)
        return time.perf_counter() - t0, alter
    finally:
        stop.set()
        runner.join(120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--policy", choices=("backfill", "nobackfill"), default="backfill")
    ap.add_argument(
        "--running",
        action="store_true",
        help="time the backfill under a running query (run_forever), from the ALTER's commit to "
        "the last backfilled message, instead of a `run --until-idle` started after the ALTER",
    )
    ap.add_argument(
        "--no-float",
        action="store_true",
        help="leave out the FLOAT column (its JSON rendering dominates encoding)",
    )
    args = ap.parse_args()
    import changefeed
    import proctree  # this directory is the script's: first on sys.path
    from changefeed.pipeline.runner import run_until_idle, warm
    from changefeed.pipeline.spark.session import get_spark

    with tempfile.TemporaryDirectory(prefix="backfill-bench-") as tmp:
        db = Path(tmp) / "db"
        t0 = time.perf_counter()
        build(db, args.rows, args.policy, floats=not args.no_float)
        print(f"table: {args.rows:,} rows built in {time.perf_counter() - t0:.1f} s")
        spark = warm(get_spark("backfill-bench"))
        run_until_idle(db, spark=spark, gc=False)  # starts the feed's checkpoint
        t0 = time.perf_counter()
        run_until_idle(db, spark=spark, gc=False)
        empty = time.perf_counter() - t0
        passes = 2 if args.policy == "backfill" else 1
        cpu0 = proctree.cpu_seconds(proctree.tree(os.getpid()))
        if args.running:
            seconds, alter = _running(db, spark, args.rows * passes)
        else:
            with changefeed.connect(db) as conn:
                t0 = time.perf_counter()
                conn.execute("ALTER TABLE t ADD COLUMN d INT DEFAULT 7")
                alter = time.perf_counter() - t0
            t0 = time.perf_counter()
            run_until_idle(db, spark=spark, gc=False)
            seconds = time.perf_counter() - t0
        cpu = proctree.cpu_seconds(proctree.tree(os.getpid())) - cpu0
        messages = count(db, "t")
        if messages != passes * args.rows:
            print(f"error: {messages:,} messages delivered, expected {passes * args.rows:,}")
            return 1
        rate = args.rows / seconds
        print(f"ALTER TABLE .. ADD COLUMN .. DEFAULT: {alter:.1f} s; an empty run: {empty:.1f} s")
        print(
            f"backfill ({args.policy}): {args.rows:,} rows, {messages:,} messages in {seconds:.1f} s: "
            f"{rate:,.0f} rows/s, {messages / seconds:,.0f} messages/s"
        )
        load = os.getloadavg()[0]
        print(f"CPU of the process tree (driver, JVM, workers): {cpu:.1f} s; load average {load:.1f}")
        print(f"target >= {TARGET:,} rows/s: {'yes' if rate >= TARGET else 'no'} (ratio {rate / TARGET:.2f})")
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
