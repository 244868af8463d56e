"""Core CockroachDB changefeeds: commit-to-client latency under a steady write load, and the
initial scan's throughput to stdout.

    .venv/bin/python benchmarks/crdb_core_bench.py [--rate 2000] [--seconds 10] [--scan-rows 1000000]

1. Latency: ``Connection.stream("EXPERIMENTAL CHANGEFEED FOR t WITH updated, no_initial_scan")``
   in this process while a writer process commits 20-row transactions at ``--rate`` rows/s; each
   message's latency is its receive time minus its ``updated`` timestamp (the commit clock's wall
   time, taken when the transaction starts, so it includes the commit itself). Targets: p50 <=
   0.3 s, p99 <= 1 s.
2. Scan: ``changefeed sql --db DIR "EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan_only"`` over a
   table of ``--scan-rows`` rows (id INT, name STRING, amount DECIMAL(10,2)), stdout to a file;
   rows/s from the command's wall time (process start included). Target >= 100,000 rows/s.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import changefeed

SRC = str(Path(__file__).resolve().parents[1] / "src")
TXN_ROWS = 20


def writer(db: str, rate: int, seconds: float, start: float) -> None:
    conn = changefeed.connect(db)
    n = 0
    while time.time() < start:
        time.sleep(0.001)
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        rows = [(n + i, f"row {n + i}") for i in range(TXN_ROWS)]
        conn.executemany("INSERT INTO t (id, name) VALUES ($1, $2)", rows)
        n += TXN_ROWS
        delay = t0 + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    conn.close()


def latency(rate: int, seconds: float) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "db")
        conn = changefeed.connect(db)
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, name STRING)")
        total = int(rate * seconds) // TXN_ROWS * TXN_ROWS
        feed = conn.stream("EXPERIMENTAL CHANGEFEED FOR t WITH updated, no_initial_scan")
        start = time.time() + 1.0
        proc = mp.get_context("spawn").Process(target=writer, args=(db, rate, seconds, start))
        proc.start()
        lat: list[float] = []
        with feed:
            for _, _, value in feed:
                now = time.time_ns()
                wall = int(json.loads(value)["updated"].split(".")[0])
                lat.append((now - wall) / 1e9)
                if len(lat) >= total:
                    break
        proc.join()
        conn.close()
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1], len(lat)


def scan(rows: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "db"
        conn = changefeed.connect(db)
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, name STRING, amount DECIMAL(10,2))")
        t0 = time.monotonic()
        batch = 10_000
        for a in range(0, rows, batch):
            conn.executemany(
                "INSERT INTO t (id, name, amount) VALUES ($1, $2, $3)",
                [(i, f"name {i}", f"{i % 1000}.{i % 100:02d}") for i in range(a, min(rows, a + batch))],
            )
        load_s = time.monotonic() - t0
        conn.close()
        out = Path(tmp) / "out.csv"
        env = {**os.environ, "PYTHONPATH": SRC}
        t0 = time.monotonic()
        with out.open("w") as fh:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "changefeed.cli.main",
                    "sql",
                    "--db",
                    str(db),
                    "EXPERIMENTAL CHANGEFEED FOR t WITH initial_scan_only",
                ],
                stdout=fh,
                env=env,
                check=True,
            )
        elapsed = time.monotonic() - t0
        with out.open() as fh:
            lines = sum(1 for _ in fh) - 1
        assert lines == rows, (lines, rows)
    return rows / elapsed, load_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=2000, help="rows/s written during the latency run")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--scan-rows", type=int, default=1_000_000)
    ap.add_argument("--skip-scan", action="store_true")
    args = ap.parse_args()
    p50, p99, n = latency(args.rate, args.seconds)
    print(f"latency: {n} rows at {args.rate} rows/s: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    print(f"  vs targets: p50 {p50 / 0.3:.2f} x 0.3 s, p99 {p99 / 1.0:.2f} x 1 s")
    if not args.skip_scan:
        rps, load_s = scan(args.scan_rows)
        print(
            f"initial scan: {args.scan_rows} rows to stdout at {rps:,.0f} rows/s (load took {load_s:.1f} s)"
        )
        print(f"  vs target: {rps / 100_000:.2f} x 100,000 rows/s")


if __name__ == "__main__":
    main()
