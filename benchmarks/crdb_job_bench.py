"""A CockroachDB changefeed job on Spark vs the plain Python loop doing the same encoding.

    .venv/bin/python benchmarks/crdb_job_bench.py [--rows 1000000] [--skip-baseline]

Builds a journal of N change rows (UPSERTs of distinct keys in 50,000-row transactions into
``t (k INT PRIMARY KEY, a STRING, b INT, c FLOAT)``, 4 partitions) under a job created first with
``CREATE CHANGEFEED FOR t INTO 'topics://' WITH updated, diff, resolved = '1s',
min_checkpoint_frequency = '1s', no_initial_scan``, copies the database, then delivers it twice:

(a) the single-process baseline (``changefeed.pipeline.baseline``: same journal reads, the
    encoder's plain-Python face, same topic appends) on one copy: rows/s;
(b) ``changefeed run --until-idle`` on the other: steady-state rows/s over the delivery phase
    (first record in the topic to the last; session start excluded);

and prints both, the ratio Spark/baseline (target >= 1.0) and whether Spark reached 100,000 rows/s.
Needs the ``crdb-json`` encoder (``formats/crdb_json.py``); says so and exits 2 without it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pipeline_bench import CLI, env, topic_count
from proctree import TreeMemory

PY = sys.executable
JOB = (
    "CREATE CHANGEFEED FOR t INTO 'topics://' WITH updated, diff, resolved = '1s', "
    "min_checkpoint_frequency = '1s', no_initial_scan"
)


def encoder_missing() -> str | None:
    try:
        from changefeed.formats.base import get_encoder

        get_encoder("crdb-json")
    except Exception as exc:
        return f"the crdb-json encoder is not available ({exc})"
    return None


def build(db: Path, rows: int, chunk: int = 50_000) -> tuple[float, int]:
    import changefeed

    t0 = time.perf_counter()
    with changefeed.connect(db) as conn:
        conn.execute(
            "CREATE TABLE t (k INT PRIMARY KEY, a STRING, b INT, c FLOAT) WITH (uniform_partitions = 4)"
        )
        (job_id,) = conn.execute(JOB).rows[0]
        for lo in range(0, rows, chunk):
            conn.executemany(
                "UPSERT INTO t (k, a, b, c) VALUES (?, ?, ?, ?)",
                ((k, f"name-{k}", k * 7 % 1000, k / 4.0) for k in range(lo, min(rows, lo + chunk))),
            )
        feed_id = int(conn.db.conn.execute("SELECT id FROM _feeds").fetchone()[0])
    assert job_id
    return time.perf_counter() - t0, feed_id


def run_baseline(db: Path, feed_id: int) -> dict[str, Any]:
    code = (
        "import json, time; from changefeed.pipeline.baseline import deliver; t = time.perf_counter(); "
        + f"n = deliver({str(db)!r}, {feed_id}); print(json.dumps({{'records': n, 'seconds': time.perf_counter() - t}}))"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env(), check=True)
    res: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return res


def run_spark_until_idle(db: Path, topic: str, expect: int) -> dict[str, Any]:
    """Wall time of ``changefeed run --until-idle`` and its delivery phase (first record -> last)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [CLI, "run", "--db", str(db), "--until-idle"],
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    mem = TreeMemory(proc.pid)
    mem.start()
    first: tuple[float, int] | None = None
    last = None
    while proc.poll() is None:
        n = topic_count(db, topic)
        now = time.perf_counter()
        if n and first is None:
            first = (now, n)
        if n >= expect and last is None:
            last = now
        time.sleep(0.05)
    n = topic_count(db, topic)
    end = time.perf_counter()
    mem.stop.set()
    mem.join()
    out = proc.stdout.read().decode() if proc.stdout else ""
    if proc.returncode != 0:
        raise RuntimeError(f"changefeed run failed ({proc.returncode}):\n{out[-3000:]}")
    last = last or end
    first = first or (end, 0)
    delivery = max(last - first[0], 1e-9)
    rate = (n - first[1]) / delivery if n > first[1] else n / (end - t0)
    return {"records": n, "wall": end - t0, "delivery_s": delivery, "rate": rate, "rss_gb": mem.peak_gb}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--skip-baseline", action="store_true")
    args = ap.parse_args()
    missing = encoder_missing()
    if missing:
        print(f"skipped: {missing}")
        return 2
    with tempfile.TemporaryDirectory(prefix="crdb-job-bench-") as tmp:
        spark_db, base_db = Path(tmp) / "spark", Path(tmp) / "baseline"
        seconds, feed_id = build(spark_db, args.rows)
        print(f"journal: {args.rows:,} change rows built in {seconds:.1f} s")
        shutil.copytree(spark_db, base_db)
        base_rate = None
        if not args.skip_baseline:
            b = run_baseline(base_db, feed_id)
            base_rate = args.rows / b["seconds"]
            print(
                f"(a) baseline (plain Python loop, same encoding): {base_rate:,.0f} rows/s ({b['seconds']:.1f} s)"
            )
        s = run_spark_until_idle(spark_db, "t", args.rows)
        got = topic_count(spark_db, "t")
        print(
            f"(b) Spark changefeed run --until-idle: {s['rate']:,.0f} rows/s steady state "
            f"(delivery {s['delivery_s']:.1f} s, wall {s['wall']:.1f} s, {got:,} records incl. resolved, "
            f"peak RSS {s['rss_gb']:.2f} GB)"
        )
        # The delivery phase starts at the first record in the topic: when one micro-batch holds
        # most rows it covers only that batch's appends, not its read and encoding (see README).
        print(
            f"(b') Spark end to end: {args.rows / s['wall']:,.0f} rows/s (rows / wall, session start included)"
        )
        if base_rate:
            print(f"ratio Spark/baseline: {s['rate'] / base_rate:.2f} (target >= 1.0)")
            print(f"ratio Spark end to end/baseline: {args.rows / s['wall'] / base_rate:.2f}")
        print(f"Spark >= 100,000 rows/s: {'yes' if s['rate'] >= 100_000 else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
