"""What keeping a CockroachDB table's change history costs its writers (issue 17).

    python benchmarks/crdb_history_bench.py [--rows 200000] [--single 5000] [--runs 3]

A CockroachDB table keeps its change history from its creation for ``gc.ttlseconds`` (so a
``cursor`` works before the first changefeed). Before, a table without a changefeed wrote no
history; ``WITH (changes = false)`` still does that, and is the "before" here. No changefeed
exists in either configuration.

Table ``orders (id INT8 PRIMARY KEY, customer STRING, amount DECIMAL(10,2), qty INT8)``, written
through the public API with bound parameters: 1,000-row transactions (``executemany``: half of
them overwrite existing keys, then new keys) and single-row ``UPSERT`` transactions. Prints rows/s
per configuration (median of ``--runs``, the configurations alternating run by run so that load
spikes hit both alike) and the ratio history-on / history-off, by wall time and by the process's
CPU time (steadier on a loaded machine). Target: >= 0.8.
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

CREATE = "CREATE TABLE orders (id INT8 PRIMARY KEY, customer STRING, amount DECIMAL(10,2), qty INT8){}"
UPSERT = "UPSERT INTO orders (id, customer, amount, qty) VALUES (?, ?, ?, ?)"
CONFIGS = {"history off (before)": " WITH (changes = false)", "history kept (now)": ""}


def _rows(start: int, n: int) -> list[tuple[int, str, str, int]]:
    return [
        (i, f"customer-{i % 977}", f"{i % 10_000}.{i % 100:02d}", i % 13) for i in range(start, start + n)
    ]


def bench(config: str, rows: int, batch: int, root: Path) -> tuple[float, float]:
    """(rows/s by wall time, rows/s by CPU time)."""
    db = root / f"{config.split()[1]}-{batch}"
    shutil.rmtree(db, ignore_errors=True)
    conn = changefeed.connect(db)
    conn.execute(CREATE.format(CONFIGS[config]))
    if batch > 1:
        conn.executemany(UPSERT, _rows(0, min(rows, 10_000) // 2))  # the first writes overwrite these
    t0, c0 = time.perf_counter(), time.process_time()
    done = 0
    if batch == 1:
        for r in _rows(0, rows):
            conn.execute(UPSERT, r)
        done = rows
    else:
        while done < rows:
            conn.executemany(UPSERT, _rows(done, batch))
            done += batch
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    conn.close()
    shutil.rmtree(db, ignore_errors=True)
    return done / elapsed, done / cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="rows written in 1,000-row transactions")
    ap.add_argument("--single", type=int, default=5_000, help="rows written in single-row transactions")
    ap.add_argument("--runs", type=int, default=3, help="runs per configuration (median shown)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cf-history-bench-"))
    load = os.getloadavg()[0]
    print(f"cores: {os.cpu_count()}  load (1 min): {load:.1f}  dir: {root}")
    print(
        f"{'configuration':<22} {'txn size':>9} {'rows/s':>10} {'vs off':>7} {'CPU rows/s':>11} {'vs off':>7}  target"
    )
    for batch, n in ((1000, args.rows), (1, args.single)):
        runs: dict[str, list[tuple[float, float]]] = {c: [] for c in CONFIGS}
        for _ in range(args.runs):
            for config in CONFIGS:
                runs[config].append(bench(config, n, batch, root))
        base = None
        for config, got in runs.items():
            wall = statistics.median(w for w, _ in got)
            cpu = statistics.median(c for _, c in got)
            base = base or (wall, cpu)
            target = "" if config.startswith("history off") else "ratio >= 0.8"
            print(
                f"{config:<22} {batch:>9} {wall:>10,.0f} {wall / base[0]:>7.2f} {cpu:>11,.0f} {cpu / base[1]:>7.2f}"
                f"  {target}"
            )
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
