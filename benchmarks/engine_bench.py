"""Write throughput of the engine with the CDC journal off, deltas only, and pre+post images.

    python benchmarks/engine_bench.py [--rows 200000] [--single 5000] [--shape cql|sql|both]

Two table shapes: ``cql``, the ScyllaDB-shaped ``ks.t (k bigint PRIMARY KEY, a text, b bigint,
c double)`` stored in partition-token (hash) order; ``sql``, a YDB-style ordered-key table loaded
with UPSERTs of increasing keys. Rows are written with bound parameters through the public API
(``Connection.executemany`` for 1,000-row transactions, ``Connection.execute`` per row for
single-row transactions). Prints rows/s per configuration and the ratio journal-on / journal-off.
Targets (issue 2): ratio >= 0.7 with deltas, >= 0.5 with both images; 1,000-row transactions
>= 50,000 rows/s with the journal on. A fourth configuration, ``changefeed``, has no target: it
writes the change stream a YDB NEW_AND_OLD_IMAGES changefeed reads instead of the ScyllaDB log.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import changefeed
from changefeed.sqlite_wal import DEFAULT_SYNCHRONOUS

CONFIGS = {
    "journal off": "",
    "deltas": "{'enabled': true}",
    "pre+post images": "{'enabled': true, 'preimage': 'full', 'postimage': true}",
    "changefeed": "",
}
CHANGEFEED = "ALTER TABLE `{}` ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')"
SHAPES = {
    "cql": (
        "cql",
        "CREATE TABLE ks.t (k bigint PRIMARY KEY, a text, b bigint, c double)",
        "ALTER TABLE ks.t WITH cdc = {}",
        "INSERT INTO ks.t (k, a, b, c) VALUES (?, ?, ?, ?)",
    ),
    "sql": (
        "sql",
        "CREATE TABLE ks.o (k Int64, a Utf8, b Int64, c Double, PRIMARY KEY (k))",
        "ALTER TABLE ks.o WITH cdc = {}",
        "UPSERT INTO ks.o (k, a, b, c) VALUES (?, ?, ?, ?)",
    ),
}


def _rows(start: int, n: int) -> list[tuple[int, str, int, float]]:
    return [(i, f"value-{i}", i * 7, i / 3) for i in range(start, start + n)]


def bench(shape: str, config: str, rows: int, batch: int, root: Path) -> float:
    dialect, create, alter, insert = SHAPES[shape]
    db = root / f"{shape}-{config.replace(' ', '_').replace('+', '')}-{batch}"
    shutil.rmtree(db, ignore_errors=True)
    with changefeed.connect(db, dialect=dialect) as setup:
        setup.execute(create)
    if CONFIGS[config]:
        with changefeed.connect(db, dialect="cql") as cql:
            cql.execute(alter.format(CONFIGS[config]))
    if config == "changefeed":
        with changefeed.connect(db) as sql:
            sql.execute(CHANGEFEED.format(alter.split()[2]))
    conn = changefeed.connect(db, dialect=dialect)
    INSERT = insert
    # A few existing rows: the first writes overwrite them, the rest insert new keys.
    if batch > 1:
        conn.executemany(INSERT, _rows(0, min(rows, 10_000) // 2))
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
    ap.add_argument(
        "--shape", choices=["cql", "sql", "both"], default="both", help="table shape(s) to measure"
    )
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="cf-engine-bench-"))
    print(
        f"cores: {os.cpu_count()}  synchronous: {os.environ.get('CHANGEFEED_SYNCHRONOUS', DEFAULT_SYNCHRONOUS)}  dir: {root}"
    )
    print(f"{'shape':<6} {'configuration':<18} {'txn size':>9} {'rows/s':>10} {'vs off':>7}  target")
    shapes = ["cql", "sql"] if args.shape == "both" else [args.shape]
    for shape in shapes:
        for batch, n in ((1000, args.rows), (1, args.single)):
            base = None
            for config in CONFIGS:
                rate = bench(shape, config, n, batch, root)
                base = base or rate
                ratio = rate / base
                target = {
                    "journal off": "",
                    "deltas": "ratio >= 0.7",
                    "pre+post images": "ratio >= 0.5",
                    "changefeed": "(no target)",
                }[config]
                if batch == 1000 and config in ("deltas", "pre+post images"):
                    target += ", >= 50000 rows/s"
                print(f"{shape:<6} {config:<18} {batch:>9} {rate:>10,.0f} {ratio:>7.2f}  {target}")
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
