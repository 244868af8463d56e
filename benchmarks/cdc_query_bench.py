"""CDC-query jobs on Spark (issue 17): what a predicate and a projection save.

    .venv/bin/python benchmarks/cdc_query_bench.py [--rows 1000000] [--runs 1]

Builds a journal of ``--rows`` UPSERTs into a ten-column table ``t`` (50,000-row transactions)
under three jobs created first (``no_initial_scan``, ``INTO 'topics://?topic_prefix=..'``):

* ``all``: ``AS SELECT * FROM t`` (the baseline: every row, every column);
* ``filter 10%``: ``AS SELECT * FROM t WHERE k % 10 = 0``;
* ``project 2 of 10``: ``AS SELECT k, s1 FROM t``;

and the same job without a query (``FOR t .. WITH envelope = bare``, for reference); then, for
each, copies the database, cancels the other jobs there and times ``run_until_idle`` on one
Spark session (the journal rows over the run's wall time: the query's start is included, the
session's is not). A warm-up pass over a 20,000-row journal first runs every job once, so that
no job pays the JVM's compilation of the generated code alone. Prints rows/s and the ratio to
``all``, by wall time and by CPU time (this process, the Spark JVM and its Python workers, from
``/proc``: the machine is shared, and CPU seconds are what other processes' load does not
inflate). Targets: filter 10% >= 2x, project 2 of 10 >= 1.3x.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import changefeed

COLUMNS = (
    "k INT PRIMARY KEY, s1 STRING, i1 INT, f1 FLOAT, d1 DECIMAL(10,2), t1 TIMESTAMP, b1 BOOL, s2 STRING,"
    " i2 INT, s3 STRING"
)
QUERIES = {
    "all": "SELECT * FROM t",
    "no query": "",
    "filter 10%": "SELECT * FROM t WHERE k % 10 = 0",
    "project 2 of 10": "SELECT k, s1 FROM t",
}
TARGETS = {
    "all": "",
    "no query": "(FOR t: the same job without a query)",
    "filter 10%": ">= 2.0",
    "project 2 of 10": ">= 1.3",
}


def build(db: Path, rows: int, chunk: int = 50_000) -> dict[str, int]:
    jobs: dict[str, int] = {}
    with changefeed.connect(db) as conn:
        conn.execute(f"CREATE TABLE t ({COLUMNS})")
        for i, (name, q) in enumerate(QUERIES.items()):
            (jobs[name],) = conn.execute(
                f"CREATE CHANGEFEED INTO 'topics://?topic_prefix=q{i}_' WITH no_initial_scan AS {q}"
                if q
                else f"CREATE CHANGEFEED FOR t INTO 'topics://?topic_prefix=q{i}_' WITH no_initial_scan, envelope = bare"
            ).rows[0]
        for lo in range(0, rows, chunk):
            conn.executemany(
                "UPSERT INTO t (k, s1, i1, f1, d1, t1, b1, s2, i2, s3) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        k,
                        f"name-{k}",
                        k * 7 % 1000,
                        k / 4.0,
                        f"{k % 10_000}.{k % 100:02d}",
                        "2024-01-02 03:04:05",
                        k % 3 == 0,
                        f"city-{k % 101}",
                        k % 13,
                        f"note {k}",
                    )
                    for k in range(lo, min(rows, lo + chunk))
                ),
            )
    return jobs


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and every live descendant (the Spark JVM, its
    Python workers), from /proc (Linux)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry)
        parents[pid] = int(fields[1])
        times[pid] = (int(fields[11]) + int(fields[12])) / tick
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return sum(times.get(p, 0.0) for p in mine)


def main() -> None:
    from changefeed.pipeline.runner import run_until_idle, warm
    from changefeed.pipeline.spark.session import get_spark

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cf-cdc-query-bench-"))
    base = root / "base"
    t0 = time.perf_counter()
    jobs = build(base, args.rows)
    print(f"cores: {os.cpu_count()}  load (1 min): {os.getloadavg()[0]:.1f}")
    print(f"journal: {args.rows:,} change rows in {time.perf_counter() - t0:.1f} s")
    spark = warm(get_spark("cdc-query-bench"))
    small = root / "warm-up"
    small_jobs = build(small, 20_000)
    rates: dict[str, list[float]] = {n: [] for n in QUERIES}
    cpu_rates: dict[str, list[float]] = {n: [] for n in QUERIES}
    for run in range(-1, args.runs):
        src, ids = (small, small_jobs) if run < 0 else (base, jobs)
        for name in QUERIES:
            db = root / f"{run}-{name.replace(' ', '_').replace('%', '')}"
            shutil.copytree(src, db)
            with changefeed.connect(db) as conn:
                for other, jid in ids.items():
                    if other != name:
                        conn.execute(f"CANCEL JOB {jid}")
            t, c = time.perf_counter(), cpu_seconds()
            run_until_idle(db, spark=spark, gc=False)
            if run >= 0:
                rates[name].append(args.rows / (time.perf_counter() - t))
                cpu_rates[name].append(args.rows / max(cpu_seconds() - c, 1e-9))
            shutil.rmtree(db, ignore_errors=True)
    base_rate = statistics.median(rates["all"])
    base_cpu = statistics.median(cpu_rates["all"])
    print(f"{'job':<18} {'rows/s':>10} {'vs all':>7} {'rows/CPU s':>11} {'vs all':>7}  target")
    for name in QUERIES:
        r = statistics.median(rates[name])
        cr = statistics.median(cpu_rates[name])
        print(
            f"{name:<18} {r:>10,.0f} {r / base_rate:>7.2f} {cr:>11,.0f} {cr / base_cpu:>7.2f}  {TARGETS[name]}"
        )
    spark.stop()
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
