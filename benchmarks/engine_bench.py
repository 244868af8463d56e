"""Write throughput of the engine with the CDC journal off, deltas only, and pre+post images.

    python benchmarks/engine_bench.py [--rows 200000] [--single 5000]

One CQL table ``ks.t (k bigint PRIMARY KEY, a text, b bigint, c double)``; rows are written with
bound parameters through the public API (``Connection.executemany`` for 1,000-row transactions,
``Connection.execute`` per row for single-row transactions). Prints rows/s per configuration and
the ratio journal-on / journal-off. Targets (issue 2): ratio >= 0.7 with deltas, >= 0.5 with both
images; 1,000-row transactions >= 50,000 rows/s with the journal on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import changefeed

CONFIGS = {
    "journal off": "",
    "deltas": " WITH cdc = {'enabled': true}",
    "pre+post images": " WITH cdc = {'enabled': true, 'preimage': 'full', 'postimage': true}",
}
INSERT = "INSERT INTO ks.t (k, a, b, c) VALUES (?, ?, ?, ?)"


def _rows(start: int, n: int) -> list[tuple[int, str, int, float]]:
    return [(i, f"value-{i}", i * 7, i / 3) for i in range(start, start + n)]


def bench(config: str, rows: int, batch: int, root: Path) -> float:
    db = root / f"{config.replace(' ', '_').replace('+', '')}-{batch}"
    shutil.rmtree(db, ignore_errors=True)
    conn = changefeed.connect(db, dialect="cql")
    conn.execute("CREATE TABLE ks.t (k bigint PRIMARY KEY, a text, b bigint, c double)" + CONFIGS[config])
    # Half the writes are inserts of new keys, half overwrite existing ones.
    conn.executemany(INSERT, _rows(0, min(rows, 10_000) // 2)) if batch > 1 else None
    t0 = time.perf_counter()
    done = 0
    if batch == 1:
        for r in _rows(0, rows):
            conn.execute(INSERT, r)
        done = rows
    else:
        while done < rows:
            conn.executemany(INSERT, _rows(done, batch))
            done += batch
    elapsed = time.perf_counter() - t0
    conn.close()
    return done / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="rows written in 1,000-row transactions")
    ap.add_argument("--single", type=int, default=5_000, help="rows written in single-row transactions")
    ap.add_argument("--dir", type=Path, default=None, help="where to put the databases (default: a temp dir)")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="cf-engine-bench-"))
    print(
        f"cores: {os.cpu_count()}  synchronous: {os.environ.get('CHANGEFEED_SYNCHRONOUS', 'NORMAL')}  dir: {root}"
    )
    print(f"{'configuration':<18} {'txn size':>9} {'rows/s':>10} {'vs off':>7}  target")
    for batch, n in ((1000, args.rows), (1, args.single)):
        base = None
        for config in CONFIGS:
            rate = bench(config, n, batch, root)
            base = base or rate
            ratio = rate / base
            target = {"journal off": "", "deltas": "ratio >= 0.7", "pre+post images": "ratio >= 0.5"}[config]
            if batch == 1000 and config != "journal off":
                target += ", >= 50000 rows/s"
            print(f"{config:<18} {batch:>9} {rate:>10,.0f} {ratio:>7.2f}  {target}")
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
