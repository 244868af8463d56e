"""Savepoints in a large transaction: an error-tolerant bulk load (``SAVEPOINT`` / ``INSERT`` /
``RELEASE`` around each row, as psycopg's nested ``conn.transaction()`` does) at two sizes,
against the same rows without savepoints. A savepoint that copied what the transaction had
written so far made the per-row cost grow with the row's position; rows/s must not fall with
the size.

    .venv/bin/python benchmarks/savepoint_bench.py [--rows 2000,32000]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import changefeed


def load(rows: int, savepoints: bool) -> float:
    with tempfile.TemporaryDirectory() as d, changefeed.connect(d) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v STRING)")
        start = time.perf_counter()
        conn.execute("BEGIN")
        for i in range(rows):
            if savepoints:
                conn.execute("SAVEPOINT row")
            conn.execute("INSERT INTO t VALUES ($1, 'x')", (i,))
            if savepoints:
                conn.execute("RELEASE SAVEPOINT row")
        conn.execute("COMMIT")
        return rows / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="2000,32000", help="transaction sizes, comma-separated")
    args = ap.parse_args()
    sizes = [int(x) for x in args.rows.split(",") if x]
    print(f"cores {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    first = None
    for n in sizes:
        plain = load(n, savepoints=False)
        with_sp = load(n, savepoints=True)
        first = first or with_sp
        print(
            f"{n:>7} rows: {with_sp:>9,.0f} rows/s with a savepoint per row, {plain:>9,.0f} without"
            f" ({with_sp / plain:.2f}x); against the smallest size {with_sp / first:.2f}x"
        )


if __name__ == "__main__":
    main()
