"""The CQL endpoint's targets (issue 18), against `changefeed serve --cql` in its own process:

1. reading a CDC log through ScyllaDB's Python driver with paging (target >= 100,000 rows/s);
2. reading it through scylla-cdc-go (build/cdcprint, `make cql-clients`; target >= 100,000 changes/s);
3. prepared single-row INSERTs into a CDC table from 8 concurrent driver sessions (8 processes),
   against the same INSERTs through `changefeed.connect` in one process (target >= 0.7x, p99 <= 10 ms).

    .venv/bin/python benchmarks/cql_bench.py [--rows 200000] [--inserts 4000] [--sessions 8] [--only read|go|insert]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from proctree import cpu_seconds  # noqa: E402

CDC_GO = ROOT / "build" / "cdcprint"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(db: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "changefeed"), "serve", "--db", str(db), "--cql", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the CQL endpoint did not start")


def load(db: Path, rows: int) -> None:
    import changefeed

    conn = changefeed.connect(db, dialect="cql")
    try:
        conn.execute(
            "CREATE TABLE ks.log (pk int, ck int, v text, n bigint, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
        )
        batch = 10_000
        for start in range(0, rows, batch):
            conn.executemany(
                "INSERT INTO ks.log (pk, ck, v, n) VALUES (?, ?, ?, ?)",
                [(i % 1000, i, f"value-{i}", i * 7) for i in range(start, min(rows, start + batch))],
            )
    finally:
        conn.close()


def bench_read(port: int, rows: int, server_pid: int) -> float:
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
    from cassandra.query import SimpleStatement

    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
        request_timeout=120,  # the first page runs the whole SELECT: seconds on a loaded machine
    )
    c = Cluster(
        ["127.0.0.1"], port=port, protocol_version=4, execution_profiles={EXEC_PROFILE_DEFAULT: profile}
    )
    s = c.connect()
    try:
        best = 0.0
        for _ in range(2):
            srv0, cli0 = cpu_seconds([server_pid]), time.process_time()
            t0 = time.perf_counter()
            n = sum(
                1 for _ in s.execute(SimpleStatement("SELECT * FROM ks.log_scylla_cdc_log", fetch_size=5000))
            )
            rate = n / (time.perf_counter() - t0)
            srv, cli = cpu_seconds([server_pid]) - srv0, time.process_time() - cli0
            assert n == rows, (n, rows)
            best = max(best, rate)
            print(
                f"  python driver, paged 5000: {n} rows in {n / rate:.2f} s = {rate:,.0f} rows/s;"
                f" CPU server {srv:.2f} s, client {cli:.2f} s: {n / max(srv, cli):,.0f} rows/s on two idle cores"
            )
        return best
    finally:
        c.shutdown()


def bench_go(port: int, rows: int, server_pid: int) -> float:
    if not CDC_GO.exists():
        raise SystemExit(f"{CDC_GO} is missing: run `make cql-clients`")
    srv0 = cpu_seconds([server_pid])
    out = subprocess.run(
        [
            str(CDC_GO),
            "-port",
            str(port),
            "-table",
            "ks.log",
            "-expect",
            str(rows),
            "-quiet",
            "-timeout",
            "600s",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    line = next((x for x in out.stderr.splitlines() if x.startswith("rows ")), "")
    cpu = cpu_seconds([server_pid]) - srv0
    if out.returncode != 0 or "rate" not in line:
        raise SystemExit(f"scylla-cdc-go failed: {out.stderr[-2000:]}")
    parts = line.split()
    n, secs, rate = int(parts[1]), float(parts[3]), float(parts[5])
    print(
        f"  scylla-cdc-go: {n} changes in {secs:.2f} s (from its start, 16 streams) = {rate:,.0f} changes/s;"
        f" server CPU {cpu:.2f} s ({n / cpu:,.0f} changes per server CPU-second)"
    )
    return rate


def _insert_worker(port: int, worker: int, n: int, out: mp.Queue) -> None:  # type: ignore[type-arg]
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

    profile = ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()))
    c = Cluster(
        ["127.0.0.1"], port=port, protocol_version=4, execution_profiles={EXEC_PROFILE_DEFAULT: profile}
    )
    s = c.connect()
    stmt = s.prepare("INSERT INTO ks.w (pk, ck, v) VALUES (?, ?, ?)")
    s.execute(stmt, (worker, -1, "warm"))
    out.put(("ready", worker))
    lat = []
    t0 = time.perf_counter()
    for i in range(n):
        a = time.perf_counter()
        s.execute(stmt, (worker * 1_000_000 + i, i, f"v{i}"))
        lat.append(time.perf_counter() - a)
    elapsed = time.perf_counter() - t0
    c.shutdown()
    out.put(("done", elapsed, lat))


def bench_inserts(
    db: Path, port: int, sessions: int, per_session: int, server_pid: int
) -> tuple[float, float, float]:
    import changefeed

    conn = changefeed.connect(db, dialect="cql")
    conn.execute(
        "CREATE TABLE ks.w (pk int, ck int, v text, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    conn.execute(
        "CREATE TABLE ks.base (pk int, ck int, v text, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    total = sessions * per_session
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(total):
        conn.execute("INSERT INTO ks.base (pk, ck, v) VALUES (?, ?, ?)", (i, i, f"v{i}"))
    base_rate = total / (time.perf_counter() - t0)
    base_cpu = (time.process_time() - c0) / total * 1e6
    conn.close()
    print(
        f"  changefeed.connect, one process: {total} single-row INSERTs = {base_rate:,.0f} rows/s ({base_cpu:.0f} us CPU each)"
    )

    ctx = mp.get_context("spawn")
    q: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_insert_worker, args=(port, w, per_session, q)) for w in range(sessions)]
    for p in procs:
        p.start()
    for _ in procs:
        assert q.get(timeout=120)[0] == "ready"
    srv0 = cpu_seconds([server_pid])
    results = [q.get(timeout=600) for _ in procs]
    srv_cpu = (cpu_seconds([server_pid]) - srv0) / total * 1e6
    for p in procs:
        p.join()
    wall = max(r[1] for r in results)
    lat = sorted(x for r in results for x in r[2])
    rate = total / wall
    p50 = statistics.median(lat) * 1000
    p99 = lat[int(len(lat) * 0.99)] * 1000
    print(
        f"  {sessions} driver sessions, prepared: {total} INSERTs = {rate:,.0f} rows/s"
        f" ({rate / base_rate:.2f}x), latency p50 {p50:.2f} ms, p99 {p99:.2f} ms; server {srv_cpu:.0f} us CPU each"
    )
    return rate / base_rate, p99, rate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--inserts", type=int, default=4000, help="INSERTs per session")
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--only", choices=["read", "go", "insert"])
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cql-bench-"))
    db = tmp / "db"
    port = free_port()
    print(
        f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}"
    )
    try:
        if args.only in (None, "read", "go"):
            t0 = time.perf_counter()
            load(db, args.rows)
            print(f"loaded {args.rows} log rows in {time.perf_counter() - t0:.1f} s")
        server = serve(db, port)
        try:
            if args.only in (None, "read"):
                print(f"read: target >= 100,000 rows/s -> {bench_read(port, args.rows, server.pid):,.0f}")
            if args.only in (None, "go"):
                print(
                    f"scylla-cdc-go: target >= 100,000 changes/s -> {bench_go(port, args.rows, server.pid):,.0f}"
                )
            if args.only in (None, "insert"):
                ratio, p99, _ = bench_inserts(db, port, args.sessions, args.inserts, server.pid)
                print(f"insert: target >= 0.7x and p99 <= 10 ms -> {ratio:.2f}x, p99 {p99:.2f} ms")
        finally:
            server.terminate()
            server.wait(30)
        print(f"load after: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
