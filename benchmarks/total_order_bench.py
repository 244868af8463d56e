"""``ordering = 'total'`` delivery throughput (issue 17): a three-table job's changes merged into
one commit order, wrapped with their sequence and transaction marks, appended to the embedded
topic.

    python benchmarks/total_order_bench.py [--rows 300000] [--txn 100] [--runs 3]

Writes ``--rows`` changes (UPSERTs spread over three tables, ``--txn`` changes a transaction)
after creating the job (``no_initial_scan``), then times ``total_order.deliver_all`` until the
topic holds them all. Prints rows/s (median of ``--runs``). Target: >= 50,000 rows/s.
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
from changefeed.pipeline import total_order
from changefeed.topics.store import TopicStore


def bench(rows: int, txn: int, root: Path) -> tuple[float, int]:
    db = Path(tempfile.mkdtemp(dir=root)) / "db"  # a new directory each run (connections are cached per path)
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE orders (id INT8 PRIMARY KEY, customer STRING, amount DECIMAL(10,2))")
    conn.execute("CREATE TABLE items (id INT8 PRIMARY KEY, order_id INT8, sku STRING, qty INT8)")
    conn.execute("CREATE TABLE payments (id INT8 PRIMARY KEY, order_id INT8, paid BOOL)")
    conn.execute(
        "CREATE CHANGEFEED FOR orders, items, payments INTO 'topics://?topic_name=ordered'"
        " WITH ordering = 'total', no_initial_scan, updated"
    )
    per = txn // 3
    for start in range(0, rows, per * 3):
        with conn.transaction():
            conn.executemany(
                "UPSERT INTO orders (id, customer, amount) VALUES (?, ?, ?)",
                [(i, f"c{i % 97}", f"{i % 1000}.25") for i in range(start, start + per)],
            )
            conn.executemany(
                "UPSERT INTO items (id, order_id, sku, qty) VALUES (?, ?, ?, ?)",
                [(i, i, f"sku-{i % 31}", i % 7) for i in range(start, start + per)],
            )
            conn.executemany(
                "UPSERT INTO payments (id, order_id, paid) VALUES (?, ?, ?)",
                [(i, i, i % 2 == 0) for i in range(start, start + per)],
            )
    conn.close()
    t0 = time.perf_counter()
    n = total_order.deliver_all(db)
    elapsed = time.perf_counter() - t0
    assert TopicStore(db).offsets("ordered")[0][1] == n
    return n / elapsed, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--txn", type=int, default=99, help="changes per transaction (a third per table)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cf-total-order-"))
    print(f"cores: {os.cpu_count()}  load (1 min): {os.getloadavg()[0]:.1f}")
    got = [bench(args.rows, args.txn, root) for _ in range(args.runs)]
    rate = statistics.median(r for r, _ in got)
    print(f"ordering = 'total': {got[0][1]:,} changes, {rate:,.0f} rows/s (runs: "
          f"{', '.join(f'{r:,.0f}' for r, _ in got)})  target >= 50,000 rows/s")  # fmt: skip
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
