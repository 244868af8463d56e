"""pgbench through ``changefeed serve --pg`` side by side with PostgreSQL, in one run.

    python benchmarks/pgbench_bench.py [--seconds 20] [--rounds 1] [--clients 1,8,32] [--rows 100000]
        [--scripts select-simple,select-extended,select-prepared,upsert,mix,txn] [--feed]
        [--only changefeed|postgres] [--keep] [--bulk 30] [--bulk-text same|varied]

Starts PostgreSQL from Debian's packages (``initdb`` as the unprivileged user ``nobody`` in a
temporary directory, ``fsync = on``, ``synchronous_commit = on``, loopback only) and
``changefeed serve --pg`` on a fresh database, loads ``t (id INT PRIMARY KEY, v TEXT)`` with
``--rows`` rows in both, and runs the same pgbench scripts at each client count against each side
(``-j`` up to 2 threads: the machine has 2 cores). Each run prints tps, p50/p99 latency (from
pgbench's per-transaction log) and failed transactions; then one table with the ratio
changefeed / PostgreSQL per script and client count, and each side's durability setting.
``--rounds N`` runs each pair N times, the sides alternating which goes first: the table then
shows each side's median run and the median of the rounds' ratios with their range (single
runs on a shared machine vary by a third or more).

Scripts (random keys over the loaded rows; both sides get the same statements, except that the
upsert is ``UPSERT INTO`` for changefeed and ``INSERT .. ON CONFLICT (id) DO UPDATE`` for
PostgreSQL, which has no UPSERT):

* ``select-simple`` / ``select-extended`` / ``select-prepared``: ``SELECT v FROM t WHERE id = :id``
  with pgbench's ``-M simple``, ``-M extended`` (unnamed statement parsed every time) and
  ``-M prepared`` (named statement parsed once);
* ``upsert``: one single-row upsert per transaction (``-M prepared``);
* ``mix``: 90% the point select, 10% the upsert (``-M prepared``);
* ``txn``: ``BEGIN; UPDATE; SELECT; UPSERT; COMMIT`` (``-M prepared``);

Then the bulk figure: ``executemany`` of ``--bulk`` transactions of 1,000 rows through
``changefeed.connect`` in this process and through the endpoint with psycopg, asyncpg and
pgjdbc (``executeBatch``, plain and with ``reWriteBatchedInserts``), taking turns a transaction
at a time so that all meet the same load: rows/s, server and client CPU per row, and each
client's ratio to ``connect``.
``--scripts ''`` runs the bulk figure alone (no PostgreSQL, no pgbench needed).

``--feed`` adds a YDB changefeed (``NEW_AND_OLD_IMAGES``) to the changefeed table, so each write
also writes the change stream. The changefeed side's durability is ``CHANGEFEED_SYNCHRONOUS`` as
set in the environment (default ``FULL``: durable across power loss, group commit).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
sys.path.insert(0, str(SRC))

import changefeed  # noqa: E402
from changefeed.testing.postgres import PostgresError, PostgresServer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proctree import cpu_seconds, tree  # noqa: E402

SCRIPTS = ("select-simple", "select-extended", "select-prepared", "upsert", "mix", "txn")


@dataclass(frozen=True)
class Run:
    side: str
    script: str
    clients: int
    tps: float
    p50_ms: float
    p99_ms: float
    failed: int
    transactions: int
    #: Server CPU (user + system, all its processes) per transaction, µs: steadier than tps on a
    #: shared machine.
    cpu_us: float


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode} before listening on {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    sys.exit(f"nothing listens on {port} after {timeout} s")


def script_files(tmp: Path, side: str, rows: int) -> dict[str, tuple[list[str], str]]:
    """script name -> (pgbench -f arguments, -M mode)."""
    d = tmp / f"scripts-{side}"
    d.mkdir(exist_ok=True)
    upsert = (
        "UPSERT INTO t (id, v) VALUES (:id, 'pgbench')"
        if side == "changefeed"
        else "INSERT INTO t (id, v) VALUES (:id, 'pgbench') ON CONFLICT (id) DO UPDATE SET v = excluded.v"
    )
    texts = {
        "select": f"\\set id random(1, {rows})\nSELECT v FROM t WHERE id = :id;\n",
        "upsert": f"\\set id random(1, {rows})\n{upsert};\n",
        "txn": (
            f"\\set a random(1, {rows})\n\\set b random(1, {rows})\n\\set c random(1, {rows})\n"
            "BEGIN;\nUPDATE t SET v = 'txn' WHERE id = :a;\nSELECT v FROM t WHERE id = :b;\n"
            f"{upsert.replace(':id', ':c')};\nCOMMIT;\n"
        ),
    }
    for name, text in texts.items():
        (d / f"{name}.sql").write_text(text)
    sel, ups, txn = str(d / "select.sql"), str(d / "upsert.sql"), str(d / "txn.sql")
    return {
        "select-simple": (["-f", sel], "simple"),
        "select-extended": (["-f", sel], "extended"),
        "select-prepared": (["-f", sel], "prepared"),
        "upsert": (["-f", ups], "prepared"),
        "mix": (["-f", f"{sel}@9", "-f", f"{ups}@1"], "prepared"),
        "txn": (["-f", txn], "prepared"),
    }


def server_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of ``pid``, its live descendants (the endpoint's worker
    processes) and the children it has reaped (PostgreSQL's backends, which exit with their
    connections, count in the postmaster's once reaped)."""
    return cpu_seconds(tree(pid))


def pgbench(
    side: str,
    script: str,
    files: list[str],
    mode: str,
    clients: int,
    seconds: int,
    port: int,
    user: str,
    dbname: str,
    logdir: Path,
    server_pid: int,
) -> Run:
    for f in logdir.glob("log*"):
        f.unlink()
    cpu0 = server_cpu_s(server_pid)
    cmd = [
        "pgbench",
        "-n",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "-U",
        user,
        "-M",
        mode,
        "-c",
        str(clients),
        "-j",
        str(min(clients, 2)),
        "-T",
        str(seconds),
        "-l",
        f"--log-prefix={logdir}/log",
        *files,
        dbname,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True)
    time.sleep(0.5)  # PostgreSQL's backends exit and are reaped
    cpu1 = server_cpu_s(server_pid)
    text = out.stdout + out.stderr
    m = re.search(r"tps = ([\d.]+) \(without initial connection time\)", text)
    if out.returncode != 0 or m is None:
        print(text[-2000:], file=sys.stderr)
        tps = 0.0
    else:
        tps = float(m.group(1))
    fm = re.search(r"number of failed transactions: (\d+)", text)
    failed = int(fm.group(1)) if fm else -1
    if "aborted" in text:
        failed = max(failed, 1)
    lat: list[int] = []
    for f in logdir.glob("log*"):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[2].isdigit():
                lat.append(int(parts[2]))
    lat.sort()
    p50 = lat[len(lat) // 2] / 1000 if lat else 0.0
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1000 if lat else 0.0
    return Run(side, script, clients, tps, p50, p99, failed, len(lat), (cpu1 - cpu0) * 1e6 / max(len(lat), 1))


def load_changefeed(db: Path, rows: int, feed: bool) -> None:
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")
        if feed:
            conn.execute(
                "ALTER TABLE t ADD CHANGEFEED updates WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')"
            )
        for start in range(1, rows + 1, 50_000):
            conn.executemany(
                "UPSERT INTO t (id, v) VALUES (?, ?)",
                [(i, f"value {i}") for i in range(start, min(rows, start + 49_999) + 1)],
            )


JDBC_JAR = Path("/usr/share/java/postgresql.jar")
JDBC_BULK = Path(__file__).resolve().parent / "jdbc" / "BulkInsert.java"


class JdbcBulk:
    """A JVM running ``jdbc/BulkInsert.java`` against the endpoint: each call writes transaction
    ``t``'s 1,000 rows with pgjdbc's ``addBatch``/``executeBatch`` (``rewrite``: with
    ``reWriteBatchedInserts``, multi-row INSERTs) and returns once it committed."""

    def __init__(self, port: int, table: str, varied: bool, rewrite: bool) -> None:
        if not JDBC_JAR.exists() or shutil.which("java") is None:
            sys.exit("the bulk figure needs java and /usr/share/java/postgresql.jar: run `make setup`")
        url = f"jdbc:postgresql://127.0.0.1:{port}/defaultdb?sslmode=disable&reWriteBatchedInserts={str(rewrite).lower()}"
        args = ["java", "-cp", str(JDBC_JAR), str(JDBC_BULK), url, table] + (["varied"] if varied else [])
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        if self.stdout.readline().strip() != "ready":
            sys.exit(f"{JDBC_BULK.name} did not start (exit status {self.proc.wait()})")
        for t in range(-2, -32, -1):  # the JIT compiles the driver's hot paths first
            self.run(t)

    def run(self, t: int) -> None:
        self.stdin.write(f"{t}\n")
        self.stdin.flush()
        if not self.stdout.readline():
            sys.exit(f"{JDBC_BULK.name} failed (exit status {self.proc.wait()})")

    def cpu(self) -> float:
        return cpu_seconds([self.proc.pid])

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(30)


@dataclass(frozen=True)
class Bulk:
    local_rows_s: float
    local_cpu_us: float
    #: client -> (rows/s, server CPU us/row, client CPU us/row)
    wire: dict[str, tuple[float, float, float]]


def bulk(tmp: Path, transactions: int, varied: bool = False) -> Bulk:
    """``executemany`` of 1,000-row transactions through ``changefeed.connect`` in this process,
    and through a fresh ``changefeed serve --pg`` with psycopg (pipelined Bind/Describe/Execute,
    one message flushed per row, as its executemany sends them), with asyncpg (pipelined
    Bind/Execute in large writes) and with pgjdbc in a JVM (``executeBatch``: Bind/Describe/
    Execute with a Sync every 256 rows; and with ``reWriteBatchedInserts``, multi-row INSERTs),
    each into a table of its own. They take turns a transaction at a time (in a rotating order),
    so that on a shared machine each meets the same load: the ratios compare like with like.
    Each one's time, server CPU and own CPU (the JVM's for pgjdbc) are summed over its
    transactions only."""
    import asyncio

    import asyncpg
    import psycopg

    db = tmp / "bulkdb"
    rows = [
        [(t * 1000 + j, f"value {t}.{j}" if varied else "value", j) for j in range(1000)]
        for t in range(transactions)
    ]
    with changefeed.connect(db) as conn:
        for name in ("b1", "b2", "b3", "b4", "b5", "b6", "b7"):
            conn.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v TEXT, n INT)")
    port = free_port()
    # A worker process per client (the dispatcher gives each new connection to the worker with
    # the fewest): each loads as a bulk loader alone in its worker does, its writes on the loop.
    env = {**os.environ, "PYTHONPATH": str(SRC), "CHANGEFEED_PG_WORKERS": "6"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), "--pg", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    n = transactions * 1000
    loop = asyncio.new_event_loop()
    try:
        wait_port(port, proc)
        conn = changefeed.connect(db)
        pc = psycopg.connect(f"host=127.0.0.1 port={port} user=root dbname=defaultdb sslmode=disable")
        ac = loop.run_until_complete(
            asyncpg.connect(host="127.0.0.1", port=port, user="root", database="defaultdb", ssl=False)
        )

        def with_connect(batch: list[tuple[int, str, int]]) -> None:
            conn.executemany("INSERT INTO b1 (id, v, n) VALUES ($1, $2, $3)", batch)

        def with_psycopg(batch: list[tuple[int, str, int]]) -> None:
            with pc.transaction(), pc.cursor() as cur:
                cur.executemany("INSERT INTO b2 (id, v, n) VALUES (%s, %s, %s)", batch)

        async def asyncpg_txn(batch: list[tuple[int, str, int]]) -> None:
            async with ac.transaction():
                await ac.executemany("INSERT INTO b3 (id, v, n) VALUES ($1, $2, $3)", batch)

        def with_asyncpg(batch: list[tuple[int, str, int]]) -> None:
            loop.run_until_complete(asyncpg_txn(batch))

        def with_psycopg_copy(batch: list[tuple[int, str, int]]) -> None:
            with pc.transaction(), pc.cursor() as cur, cur.copy("COPY b6 (id, v, n) FROM STDIN") as cp:
                for row in batch:
                    cp.write_row(row)

        def with_asyncpg_copy(batch: list[tuple[int, str, int]]) -> None:
            loop.run_until_complete(ac.copy_records_to_table("b7", records=batch, columns=["id", "v", "n"]))

        warm = [(-i - 1, "w", 0) for i in range(1000)]
        for way in (with_connect, with_psycopg, with_asyncpg, with_psycopg_copy, with_asyncpg_copy):
            way(warm)
        jdbc = JdbcBulk(port, "b4", varied, rewrite=False)
        jdbc_rw = JdbcBulk(port, "b5", varied, rewrite=True)
        # Each way: its call with the transaction's number and rows, and its own CPU seconds.
        ways: dict[str, tuple[Callable[[int, list[tuple[int, str, int]]], None], Callable[[], float]]] = {
            "connect": (lambda t, b: with_connect(b), time.process_time),
            "psycopg": (lambda t, b: with_psycopg(b), time.process_time),
            "asyncpg": (lambda t, b: with_asyncpg(b), time.process_time),
            "psycopg-copy": (lambda t, b: with_psycopg_copy(b), time.process_time),
            "asyncpg-copy": (lambda t, b: with_asyncpg_copy(b), time.process_time),
            "jdbc": (lambda t, b: jdbc.run(t), jdbc.cpu),
            "jdbc-rewrite": (lambda t, b: jdbc_rw.run(t), jdbc_rw.cpu),
        }
        pids = tree(proc.pid)  # the dispatcher and its workers (all started by now), found once
        spent = {name: [0.0, 0.0, 0.0] for name in ways}  # seconds, server CPU s, own CPU s
        order = list(ways)
        for t, batch in enumerate(rows):
            k = t % len(order)
            for name in order[k:] + order[:k]:
                call, own_cpu = ways[name]
                cpu0, t0, c0 = cpu_seconds(pids), time.perf_counter(), own_cpu()
                call(t, batch)
                took, own, cpu1 = time.perf_counter() - t0, own_cpu() - c0, cpu_seconds(pids)
                spent[name][0] += took
                spent[name][1] += cpu1 - cpu0
                spent[name][2] += own
        jdbc.close()
        jdbc_rw.close()
        loop.run_until_complete(ac.close())
        pc.close()
        conn.close()
        wire = {
            name: (n / spent[name][0], spent[name][1] * 1e6 / n, spent[name][2] * 1e6 / n)
            for name in order
            if name != "connect"
        }
        return Bulk(n / spent["connect"][0], spent["connect"][2] * 1e6 / n, wire)
    finally:
        loop.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def grouped(runs: list[Run]) -> dict[tuple[str, str, int], list[Run]]:
    """The runs of each (side, script, clients), in the order they ran."""
    out: dict[tuple[str, str, int], list[Run]] = {}
    for r in runs:
        out.setdefault((r.side, r.script, r.clients), []).append(r)
    return out


def median_run(runs: list[Run]) -> Run:
    """The run of median tps (the lower middle one of an even number)."""
    return sorted(runs, key=lambda r: r.tps)[(len(runs) - 1) // 2]


def round_ratios(runs: list[Run]) -> dict[tuple[str, int], list[float]]:
    """changefeed tps / PostgreSQL tps of each round (the two sides' i-th runs of a script and
    client count, which ran back to back), per (script, clients)."""
    by = grouped(runs)
    out: dict[tuple[str, int], list[float]] = {}
    for (side, script, clients), ours in by.items():
        if side != "changefeed":
            continue
        theirs = by.get(("postgres", script, clients), [])
        out[(script, clients)] = [a.tps / b.tps for a, b in zip(ours, theirs, strict=False) if b.tps]
    return out


def load_load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="runs of each script and client count on each side, alternating (the table shows medians)",
    )
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--scripts", default=",".join(SCRIPTS))
    ap.add_argument("--feed", action="store_true", help="a YDB changefeed on the changefeed table")
    ap.add_argument("--only", choices=("changefeed", "postgres"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument(
        "--bulk",
        type=int,
        default=30,
        help="1,000-row executemany transactions for the bulk figure (0: skip)",
    )
    ap.add_argument(
        "--bulk-text",
        choices=("same", "varied"),
        default="same",
        help="the bulk rows' text: 'value' in every row, or 'value T.J' (9 to 12 bytes)",
    )
    args = ap.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    scripts = [s for s in args.scripts.split(",") if s]
    for s in scripts:
        if s not in SCRIPTS:
            sys.exit(f"unknown script {s!r}; choose from {', '.join(SCRIPTS)}")
    if not scripts:  # the bulk figure only: no PostgreSQL, no pgbench
        print(f"cores {os.cpu_count()}, load average {load_load()} at start", flush=True)
        print_bulk(args.bulk, args.bulk_text == "varied")
        return
    if shutil.which("pgbench") is None:
        sys.exit("pgbench is not installed (apt-get install postgresql-contrib / postgresql; `make setup`)")

    tmp = Path(tempfile.mkdtemp(prefix="pgbench_bench"))
    os.chmod(tmp, 0o755)
    logdir = tmp / "logs"
    logdir.mkdir()
    runs: list[Run] = []
    sync = os.environ.get("CHANGEFEED_SYNCHRONOUS", "FULL").upper()
    durability = {"changefeed": f"CHANGEFEED_SYNCHRONOUS={sync}"}
    print(
        f"cores {os.cpu_count()}, load average {load_load()} at start, {args.seconds} s per run", flush=True
    )
    sides = [s for s in ("postgres", "changefeed") if args.only in (None, s)]
    servers: dict[str, tuple[int, str, str, int]] = {}  # side -> (port, user, database, pid)
    pg: PostgresServer | None = None
    proc: subprocess.Popen[bytes] | None = None
    try:
        if "postgres" in sides:
            try:
                pg = PostgresServer(tmp / "pg", free_port())
            except PostgresError as exc:
                sys.exit(str(exc))
            pg.psql("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")
            pg.psql(f"INSERT INTO t SELECT g, 'value ' || g FROM generate_series(1, {args.rows}) g")
            pg.psql("VACUUM ANALYZE t")
            durability["postgres"] = (
                f"PostgreSQL {pg.psql('SHOW server_version')}: fsync={pg.psql('SHOW fsync')}, "
                f"synchronous_commit={pg.psql('SHOW synchronous_commit')}, "
                f"wal_sync_method={pg.psql('SHOW wal_sync_method')}"
            )
            servers["postgres"] = (pg.port, "postgres", "postgres", pg.proc.pid)
        if "changefeed" in sides:
            db = tmp / "cfdb"
            load_changefeed(db, args.rows, args.feed)
            port = free_port()
            env = {**os.environ, "PYTHONPATH": str(SRC)}
            with open(tmp / "serve.log", "wb") as log:
                proc = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "changefeed.cli.main",
                        "serve",
                        "--db",
                        str(db),
                        "--pg",
                        f"127.0.0.1:{port}",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    env=env,
                )
            wait_port(port, proc)
            servers["changefeed"] = (port, "root", "defaultdb", proc.pid)
        # Both servers run for the whole benchmark and each pair of runs (same script and clients)
        # goes back to back, so that both sides of a ratio meet the same load on a shared machine.
        files = {side: script_files(tmp, side, args.rows) for side in servers}
        # Warm-up, not measured: the servers' first statements load code and caches.
        for side, (port, user, dbname, pid) in servers.items():
            for script in scripts:
                fargs, mode = files[side][script]
                pgbench(side, script, fargs, mode, 2, 1, port, user, dbname, logdir, pid)
        # With several rounds the two sides alternate which goes first, so that neither always
        # meets the machine right after the other's load.
        for script in scripts:
            for c in clients:
                for rnd in range(args.rounds):
                    order = list(servers.items())
                    if rnd % 2:
                        order.reverse()
                    for side, (port, user, dbname, pid) in order:
                        fargs, mode = files[side][script]
                        r = pgbench(
                            side, script, fargs, mode, c, args.seconds, port, user, dbname, logdir, pid
                        )
                        print(
                            f"{side:<10} {script:<16} {c:>3} clients: {r.tps:>9,.0f} tps  p50 {r.p50_ms:.2f} ms"
                            f"  p99 {r.p99_ms:.2f} ms  server CPU {r.cpu_us:,.0f} us/txn  failed {r.failed}  (load {load_load()})",
                            flush=True,
                        )
                        runs.append(r)
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if pg is not None:
            pg.stop()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")

    print()
    print(f"cores {os.cpu_count()}, load average {load_load()} at the end")
    for side, text in durability.items():
        print(f"  {side}: {text}")
    by = {key: median_run(rs) for key, rs in grouped(runs).items()}
    ratios = round_ratios(runs)
    print()
    print(
        f"{'script':<16} {'clients':>7} | {'changefeed tps':>14} {'p50':>6} {'p99':>7} {'cpu':>5} {'fail':>4} | "
        f"{'postgres tps':>12} {'p50':>6} {'p99':>7} {'cpu':>5} {'fail':>4} | ratio"
    )
    for s in scripts:
        for c in clients:
            a, b = by.get(("changefeed", s, c)), by.get(("postgres", s, c))
            left = (
                f"{a.tps:>14,.0f} {a.p50_ms:>6.2f} {a.p99_ms:>7.2f} {a.cpu_us:>5,.0f} {a.failed:>4}"
                if a
                else " " * 40
            )
            right = (
                f"{b.tps:>12,.0f} {b.p50_ms:>6.2f} {b.p99_ms:>7.2f} {b.cpu_us:>5,.0f} {b.failed:>4}"
                if b
                else " " * 38
            )
            each = ratios.get((s, c), [])
            ratio = f"{statistics.median(each):.2f}" if each else "-"
            if len(each) > 1:
                ratio += f" ({min(each):.2f}-{max(each):.2f})"
            print(f"{s:<16} {c:>7} | {left} | {right} | {ratio}")
    print(
        "(p50/p99 latency in ms; cpu: server CPU per transaction in us; ratio = changefeed tps / PostgreSQL tps"
        + (
            f"; each side's median run of {args.rounds}, the ratio the median of the rounds' ratios (their range)"
            if args.rounds > 1
            else ""
        )
        + ")"
    )
    if args.only != "postgres":
        print_bulk(args.bulk, args.bulk_text == "varied")


def print_bulk(transactions: int, varied: bool) -> None:
    """The bulk figure: each client's rows/s, server and client CPU per row, and its ratio to
    ``changefeed.connect`` in this process, all measured in one run."""
    if transactions <= 0:
        return
    tmp2 = Path(tempfile.mkdtemp(prefix="pgbench_bulk"))
    try:
        b = bulk(tmp2, transactions, varied)
    finally:
        shutil.rmtree(tmp2, ignore_errors=True)
    print()
    print(
        f"bulk executemany, {transactions} transactions of 1,000 rows ({'varied' if varied else 'same'} text): "
        "changefeed.connect "
        f"{b.local_rows_s:,.0f} rows/s ({b.local_cpu_us:.1f} us CPU/row); load {load_load()}"
    )
    for client, (rate, server_us, client_us) in b.wire.items():
        print(
            f"  through the endpoint with {client:<12} {rate:>9,.0f} rows/s (server {server_us:.1f} us CPU/row,"
            f" client {client_us:.1f} us CPU/row): ratio {rate / b.local_rows_s:.2f} (target >= 0.7)"
        )


if __name__ == "__main__":
    main()
