"""PostgreSQL endpoint figures with psycopg 3 as the client, over loopback.

    python benchmarks/pg_bench.py [--rows 1000000] [--point 2000] [--inserts 4000] [--idle 200]

Starts ``changefeed serve --pg 127.0.0.1:0`` in its own process on a fresh database, then measures
(1) point SELECT round trips (prepared, by key): p50/p99 latency; (2) single-row INSERT
transactions from 4 connections: transactions/s; (3) one SELECT of ``--rows`` rows streamed to the
client: rows/s; (4) a core changefeed's initial scan of the same ``--rows`` rows streamed with
``cursor.stream`` (text and binary results): rows/s; (5) the server's resident memory with
``--idle`` idle connections open: MB over its baseline. Prints each figure and its ratio to the
target (p50 <= 1 ms; 2,000 tx/s; 200,000 rows/s; 100,000 rows/s; 100 MB for 200 connections).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

import changefeed

SRC = Path(__file__).resolve().parent.parent / "src"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--point", type=int, default=2000)
    ap.add_argument("--inserts", type=int, default=4000)
    ap.add_argument("--idle", type=int, default=200)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="pg_bench"))
    db = tmp / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE big (k BIGINT PRIMARY KEY, v TEXT, n BIGINT)")
        conn.execute("CREATE TABLE ins (k BIGINT PRIMARY KEY, v TEXT)")
        batch = 50_000
        for start in range(0, args.rows, batch):
            conn.executemany(
                "INSERT INTO big VALUES ($1, $2, $3)",
                [(i, f"value {i}", i * 7) for i in range(start, min(args.rows, start + batch))],
            )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), "--pg", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        port = int(proc.stderr.readline().rsplit(":", 1)[1])
        dsn = f"host=127.0.0.1 port={port} user=root dbname=defaultdb sslmode=disable"

        with psycopg.connect(dsn, autocommit=True) as conn:
            lat = []
            for i in range(args.point):
                t0 = time.perf_counter()
                conn.execute(
                    "SELECT v FROM big WHERE k = %s", (i % max(args.rows, 1),), prepare=True
                ).fetchone()
                lat.append(time.perf_counter() - t0)
        lat.sort()
        p50, p99 = statistics.median(lat) * 1000, lat[int(len(lat) * 0.99)] * 1000
        print(f"point SELECT: p50 {p50:.3f} ms, p99 {p99:.3f} ms  (target p50 <= 1 ms: ratio {1 / p50:.2f})")

        per = args.inserts // 4

        def writer(w: int) -> None:
            with psycopg.connect(dsn, autocommit=True) as c:
                for i in range(per):
                    c.execute("INSERT INTO ins VALUES (%s, %s)", (w * per + i, "x"), prepare=True)

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        tps = per * 4 / (time.perf_counter() - t0)
        print(f"INSERT transactions, 4 connections: {tps:,.0f} tx/s  (target 2,000: ratio {tps / 2000:.2f})")

        with psycopg.connect(dsn, autocommit=True) as conn:
            t0 = time.perf_counter()
            n = 0
            with conn.cursor() as cur:
                cur.execute("SELECT * FROM big")
                while rows := cur.fetchmany(10_000):
                    n += len(rows)
            rps = n / (time.perf_counter() - t0)
        print(
            f"SELECT of {n:,} rows streamed: {rps:,.0f} rows/s  (target 200,000: ratio {rps / 200_000:.2f})"
        )

        for binary in (False, True):
            with psycopg.connect(dsn, autocommit=True) as conn:
                t0 = time.perf_counter()
                n = 0
                with conn.cursor(binary=binary) as cur:
                    for _ in cur.stream("EXPERIMENTAL CHANGEFEED FOR big WITH initial_scan_only"):
                        n += 1
                rps = n / (time.perf_counter() - t0)
            print(
                f"core changefeed initial scan of {n:,} rows streamed ({'binary' if binary else 'text'}):"
                f" {rps:,.0f} rows/s  (target 100,000: ratio {rps / 100_000:.2f})"
            )

        base = rss_mb(proc.pid)
        idle = [psycopg.connect(dsn, autocommit=True) for _ in range(args.idle)]
        time.sleep(1)
        grown = rss_mb(proc.pid) - base
        for c in idle:
            c.close()
        print(
            f"{args.idle} idle connections: +{grown:.1f} MB RSS over {base:.0f} MB"
            f"  (target 100 MB: ratio {100 / max(grown, 0.1):.2f})"
        )
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
