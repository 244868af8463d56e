"""Timing of the embedded topic log: append and read rates (not a test).

PYTHONPATH=src .venv/bin/python benchmarks/topics_bench.py [records]
"""

from __future__ import annotations

import sys
import tempfile
import time

import pyarrow as pa

from changefeed.topics import Consumer, TopicStore


def main(n: int = 100_000, rounds: int = 3) -> None:
    tbl = pa.table(
        {
            "key": pa.array([b'{"id":%d}' % i for i in range(n)], pa.binary()),
            "value": pa.array(
                [b'{"update":{"amount":%d},"key":[%d]}' % (i, i) for i in range(n)], pa.binary()
            ),
            "ts": pa.array(range(n), pa.int64()),
        }
    )
    with tempfile.TemporaryDirectory() as d:
        store = TopicStore(d)
        store.ensure_topic("bench/feed", 1, 0)
        best = {"append": 0.0, "read_arrow": 0.0, "read": 0.0, "consumer": 0.0}
        for b in range(rounds):
            t = time.perf_counter()
            store.append("bench/feed", 0, "bench", b, tbl)
            best["append"] = max(best["append"], n / (time.perf_counter() - t))
        for _ in range(rounds):
            t = time.perf_counter()
            got = store.read_arrow("bench/feed", 0, 0, n).num_rows
            best["read_arrow"] = max(best["read_arrow"], got / (time.perf_counter() - t))
            t = time.perf_counter()
            got = len(store.read("bench/feed", 0, 0, n))
            best["read"] = max(best["read"], got / (time.perf_counter() - t))
            t = time.perf_counter()
            c = Consumer(store, "bench/feed", from_beginning=True)
            got = sum(len(c.poll(10_000)) for _ in range(n // 10_000))
            best["consumer"] = max(best["consumer"], got / (time.perf_counter() - t))
        for name, rate in best.items():
            print(f"{name:>10}: {rate:>10,.0f} records/s  ({n:,} records, best of {rounds})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
