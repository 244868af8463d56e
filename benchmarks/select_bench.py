"""SELECT shapes through ``changefeed.connect(...).execute``, against a plain ``sqlite3`` read of
the same rows (the baseline).

    PYTHONPATH=src python benchmarks/select_bench.py [--rows N]

Prints, per shape, the engine's time and rows/s and the ratio to sqlite3 (engine time / sqlite3
time). Run it with another checkout's ``src`` first on the path to compare before and after.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import changefeed


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.rows
    with tempfile.TemporaryDirectory() as d:
        conn = changefeed.connect(Path(d) / "db")
        conn.execute("CREATE TABLE t (id Int64, a Utf8, b Int32, PRIMARY KEY (id))")
        for lo in range(0, n, 1000):
            values = ", ".join(f"({i}, 'v{i}', {i % 97})" for i in range(lo, min(n, lo + 1000)))
            conn.execute(f"UPSERT INTO t (id, a, b) VALUES {values}")
        base = sqlite3.connect(":memory:")
        base.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a TEXT, b INTEGER)")
        base.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, f"v{i}", i % 97) for i in range(n)])
        shapes = [
            ("SELECT *", "SELECT * FROM t", "SELECT * FROM t"),
            (
                "SELECT a, b WHERE b < 10",
                "SELECT a, b FROM t WHERE b < 10",
                "SELECT a, b FROM t WHERE b < 10",
            ),
            ("SELECT * LIMIT 10", "SELECT * FROM t LIMIT 10", "SELECT * FROM t LIMIT 10"),
            ("point SELECT pk = 7", "SELECT * FROM t WHERE id = 7", "SELECT * FROM t WHERE id = 7"),
        ]
        print(f"{'shape':28} {'rows':>7} {'engine ms':>10} {'rows/s':>10} {'sqlite3 ms':>10} {'ratio':>7}")
        for label, q, bq in shapes:
            t, res = _best(lambda q=q: conn.execute(q), args.repeat)
            bt, brows = _best(lambda bq=bq: base.execute(bq).fetchall(), args.repeat)
            rows = len(res.rows)
            assert rows == len(brows), (label, rows, len(brows))
            print(f"{label:28} {rows:7d} {t * 1e3:10.2f} {rows / t:10.0f} {bt * 1e3:10.3f} {t / bt:7.0f}x")
        t0 = time.perf_counter()
        k = 300
        for i in range(k):
            conn.execute("UPSERT INTO t (id, a, b) VALUES ($1, $2, $3)", [n + i, "w", i])
        dt = time.perf_counter() - t0
        print(f"single-row UPSERT transactions: {k / dt:.0f}/s ({dt / k * 1e3:.2f} ms each)")
        conn.close()


if __name__ == "__main__":
    main()
