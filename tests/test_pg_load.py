"""Load through the PostgreSQL endpoint with pgbench (issue 22).

32 pgbench clients run a mix of point SELECTs, single-row upserts and a transaction of several
statements against ``changefeed serve --pg`` on a table with a YDB changefeed, while the baseline
delivery loop follows the feed in another process (killed with SIGKILL once midway and
restarted). Afterwards: no failed or aborted pgbench transaction, the server's resident memory
flat over the run, and the feed's validators (exactly once, order, images) pass over its topic.
``make test`` runs it for 20 s; ``make soak`` for 10 minutes.

Also here: the statement cache of the simple protocol (normalised text) against full parses.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.pipeline.baseline import deliver_all
from changefeed.server.pg import normalise
from changefeed.sql.parser import parse
from changefeed.testing.validators import validate_feed
from tests.node_process import free_port

ROOT = Path(__file__).resolve().parents[1]
ROWS = 2000


def _pgbench() -> str:
    exe = shutil.which("pgbench")
    if exe is None:
        pytest.fail("pgbench is not installed: `make setup` installs Debian's postgresql package")
    return exe


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _scripts(d: Path) -> list[str]:
    files = {
        "select": f"\\set id random(1, {ROWS})\nSELECT v FROM t WHERE id = :id;\n",
        "upsert": f"\\set id random(1, {ROWS})\nUPSERT INTO t (id, v) VALUES (:id, 'pgbench');\n",
        "txn": (
            f"\\set a random(1, {ROWS})\n\\set b random(1, {ROWS})\n\\set c random(1, {ROWS})\n"
            "BEGIN;\nUPDATE t SET v = 'txn' WHERE id = :a;\nSELECT v FROM t WHERE id = :b;\n"
            "UPSERT INTO t (id, v) VALUES (:c, 'txn');\nCOMMIT;\n"
        ),
    }
    for name, text in files.items():
        (d / f"{name}.sql").write_text(text)
    return ["-f", f"{d}/select.sql@4", "-f", f"{d}/upsert.sql@5", "-f", f"{d}/txn.sql@1"]


def _follow(db: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "changefeed.pipeline.baseline",
            "--db",
            str(db),
            "--feed",
            "f",
            "--batch-rows",
            "500",
            "--follow",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
    )


def _load(tmp: Path, seconds: int, clients: int = 32) -> None:
    pgbench = _pgbench()
    db = tmp / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")
        conn.execute("ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')")
        conn.executemany("UPSERT INTO t (id, v) VALUES (?, ?)", [(i, f"v{i}") for i in range(1, ROWS + 1)])
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    server = subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), "--pg", f"127.0.0.1:{port}"],
        env=env,
        stderr=subprocess.PIPE,
    )
    follower = _follow(db)
    try:
        assert server.stderr is not None
        server.stderr.readline()  # "pg listening on ..."
        rss: list[tuple[float, float]] = []
        stop = threading.Event()

        def sample() -> None:
            t0 = time.monotonic()
            while not stop.wait(1.0):
                rss.append((time.monotonic() - t0, _rss_mb(server.pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        def kill_follower_midway() -> None:
            nonlocal follower
            if not stop.wait(seconds / 2):
                follower.kill()  # SIGKILL: exactly once must survive it
                follower.wait()
                follower = _follow(db)

        killer = threading.Thread(target=kill_follower_midway, daemon=True)
        killer.start()
        out = subprocess.run(
            [pgbench, "-n", "-h", "127.0.0.1", "-p", str(port), "-U", "root", "-M", "prepared",
             "-c", str(clients), "-j", "2", "-T", str(seconds), *_scripts(tmp), "defaultdb"],
            capture_output=True, text=True, timeout=seconds + 120,
        )  # fmt: skip
        stop.set()
        sampler.join()
        killer.join()
        text = out.stdout + out.stderr
        assert out.returncode == 0, text[-3000:]
        assert "aborted" not in text, text[-3000:]
        failed = re.search(r"number of failed transactions: (\d+)", text)
        assert failed is not None and int(failed.group(1)) == 0, text[-3000:]
        done = re.search(r"number of transactions actually processed: (\d+)", text)
        assert done is not None and int(done.group(1)) > 0, text[-3000:]
        # Memory flat: after the first quarter (caches and pools warmed), RSS stays within a band.
        warm = [m for t, m in rss if t >= seconds / 4]
        assert warm, rss
        assert max(warm) - warm[0] < 48, f"server RSS grew under load (MB over time): {rss}"
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        follower.send_signal(signal.SIGTERM)
        try:
            follower.wait(30)
        except subprocess.TimeoutExpired:
            follower.kill()
    deliver_all(db)  # what the follower had not delivered yet
    report = validate_feed(db, "t/f")
    assert report.ok, str(report)


def test_pgbench_32_clients(tmp_path: Path) -> None:
    _load(tmp_path, 20)


@pytest.mark.soak
def test_pgbench_32_clients_10_minutes(tmp_path: Path) -> None:
    _load(tmp_path, 600)


# ------------------------------------------------------------------ the normalised statement cache
CORPUS = [
    "SELECT v FROM t WHERE id = 1234",
    "SELECT v FROM t WHERE id = 1234;",
    "UPSERT INTO t (id, v) VALUES (12, 'it''s')",
    "INSERT INTO t (id, v) VALUES (1, 'a'), (2, 'b')",
    "UPDATE t SET v = 'x', n = n + 1 WHERE id = 3 AND v <> 'y'",
    "DELETE FROM t WHERE id IN (1, 2, 3)",
    "SELECT * FROM t WHERE a = -5 AND b BETWEEN 1.5 AND 2e3 LIMIT 10",
    "SELECT count(*) FROM t WHERE v = 'a' OR v IS NULL",
    "SELECT 1",
    "SELECT 'x' AS c",
    "SELECT b'ab', x'00', 7 FROM t",
    "SELECT v FROM t WHERE id = 4 -- 5",
]


@pytest.mark.parametrize("sql", CORPUS)
def test_normalised_template_binds_to_the_same_statement(sql: str) -> None:
    norm = normalise.normalise(sql)
    assert norm is not None and norm.values
    original = parse(sql, "sql")
    stmts = normalise.template(norm, original)
    if stmts is not None:
        assert normalise.bind(stmts, norm.values) == original
        # Another text of the same shape binds to its own parse.
        other = re.sub(r"(?<![\w$.'])\d+(?![\w.])", "77", sql)
        n2 = normalise.normalise(other)
        assert n2 is not None
        if n2.key == norm.key:
            assert normalise.bind(stmts, n2.values) == parse(other, "sql")


def test_normalise_leaves_what_cannot_be_a_parameter() -> None:
    assert normalise.normalise("SELECT $1 + 3") is None  # parameters of its own
    assert normalise.normalise("SELECT DATE '2020-01-01'") is None  # a typed string
    assert normalise.normalise("SELECT 1; SELECT 2") is None  # two statements
    n = normalise.normalise("CREATE TABLE x (a VARCHAR(10))")
    assert n is not None
    assert normalise.template(n, parse("CREATE TABLE x (a VARCHAR(10))", "sql")) is None


def test_simple_protocol_statements_of_one_shape_share_a_template(tmp_path: Path) -> None:
    import psycopg

    from tests.pg_server import start_server

    server = start_server(tmp_path / "db")
    try:
        _simple_protocol(psycopg, server.dsn())
    finally:
        server.stop()


def _simple_protocol(psycopg: Any, dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE s (id INT PRIMARY KEY, v TEXT)")
        for i in range(20):
            conn.execute(f"INSERT INTO s (id, v) VALUES ({i}, 'v{i}')", prepare=False)
        for i in range(20):
            row = conn.execute(f"SELECT v FROM s WHERE id = {i}", prepare=False).fetchone()
            assert row == (f"v{i}",)
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO s (id, v) VALUES (3, 'again')", prepare=False)
        with pytest.raises(psycopg.Error, match="could not parse"):  # as without the cache
            conn.execute("SELECT v FROM s WHERE id = 'nope'", prepare=False)
        assert conn.execute("SELECT count(*) FROM s").fetchone() == (20,)


# ------------------------------------------------------------------ pipelined executemany (bulk)
def test_pipelined_executemany_runs_as_one_bulk_write(tmp_path: Path) -> None:
    import psycopg

    from tests.pg_server import start_server

    server = start_server(tmp_path / "db")
    try:
        with psycopg.connect(server.dsn()) as conn:
            conn.execute("CREATE TABLE b (id INT PRIMARY KEY, v TEXT, n INT)")
            conn.commit()
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO b (id, v, n) VALUES (%s, %s, %s)", [(i, f"v{i}", i) for i in range(2500)]
                )
                # The batch runs before anything else of the transaction.
                assert cur.execute("SELECT count(*), sum(n) FROM b").fetchone() == (2500, sum(range(2500)))
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "UPSERT INTO b (id, v, n) VALUES (%s, %s, %s)", [(i, "u", -i) for i in range(10)]
                )
            assert conn.execute("SELECT v, n FROM b WHERE id = 7").fetchone() == ("u", -7)
            conn.commit()
            # A duplicate key fails the whole transaction: nothing of it stays.
            with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO b (id, v, n) VALUES (%s, %s, %s)",
                    [(5000 + i, "x", 0) for i in range(50)] + [(3, "dup", 0)],
                )
            assert conn.execute("SELECT count(*) FROM b").fetchone() == (2500,)
            conn.commit()
            # Outside a transaction each statement stays its own (autocommit): no batching.
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO b (id, v, n) VALUES (%s, %s, %s)", [(9000, "a", 0), (9001, "b", 0)]
                )
            assert conn.execute("SELECT count(*) FROM b").fetchone() == (2502,)
    finally:
        server.stop()


def _msg(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def test_batched_replies_keep_the_order_of_the_messages(tmp_path: Path) -> None:
    """Bind/Describe/Execute × 3 of one INSERT in a transaction, pipelined to one Sync: the replies
    are BindComplete, NoData, CommandComplete per row, in that order, as PostgreSQL sends them."""
    from tests.pg_server import start_server

    server = start_server(tmp_path / "db")
    try:
        with changefeed.connect(tmp_path / "db") as conn:
            conn.execute("CREATE TABLE o (id INT PRIMARY KEY, v TEXT)")
        s = socket.create_connection((server.host, server.port), timeout=10)
        body = struct.pack("!i", 196608) + b"user\x00root\x00database\x00defaultdb\x00\x00"
        s.sendall(struct.pack("!i", len(body) + 4) + body)
        _read(s, b"Z")
        s.sendall(_msg(b"Q", b"BEGIN\x00"))
        _read(s, b"Z")
        out = _msg(b"P", b"ins\x00INSERT INTO o (id, v) VALUES ($1, $2)\x00" + struct.pack("!h", 0))
        for i in range(3):
            vals = [str(i).encode(), f"v{i}".encode()]
            params = b"".join(struct.pack("!i", len(v)) + v for v in vals)
            out += _msg(
                b"B",
                b"\x00ins\x00" + struct.pack("!h", 0) + struct.pack("!h", 2) + params + struct.pack("!h", 0),
            )
            out += _msg(b"D", b"P\x00")
            out += _msg(b"E", b"\x00" + struct.pack("!i", 0))
        s.sendall(out + _msg(b"S", b""))
        kinds = [k for k, _ in _read(s, b"Z")]
        assert kinds == [b"1"] + [b"2", b"n", b"C"] * 3 + [b"Z"]
        s.sendall(_msg(b"Q", b"COMMIT\x00"))
        _read(s, b"Z")
        s.close()
        with changefeed.connect(tmp_path / "db") as conn:
            assert conn.execute("SELECT id, v FROM o ORDER BY id").rows == [(0, "v0"), (1, "v1"), (2, "v2")]
    finally:
        server.stop()


def _read(s: socket.socket, until: bytes) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    buf = b""
    while True:
        while len(buf) >= 5:
            (n,) = struct.unpack("!i", buf[1:5])
            if len(buf) < 1 + n:
                break
            kind, body, buf = buf[:1], buf[5 : 1 + n], buf[1 + n :]
            out.append((kind, body))
            if kind == until:
                return out
        chunk = s.recv(65536)
        if not chunk:
            return out
        buf += chunk


def _startup(server: Any) -> socket.socket:
    s = socket.create_connection((server.host, server.port), timeout=10)
    body = struct.pack("!i", 196608) + b"user\x00root\x00database\x00defaultdb\x00\x00"
    s.sendall(struct.pack("!i", len(body) + 4) + body)
    _read(s, b"Z")
    return s


def _run_bind(stmt: bytes, values: list[bytes | None]) -> bytes:
    """Bind (all parameters binary, results binary) and Execute of the unnamed portal."""
    body = b"\x00" + stmt + b"\x00" + struct.pack("!hh", 1, 1) + struct.pack("!h", len(values))
    for v in values:
        body += b"\xff\xff\xff\xff" if v is None else struct.pack("!i", len(v)) + v
    return _msg(b"B", body + struct.pack("!hh", 1, 1)) + _msg(b"E", b"\x00" + struct.pack("!i", 0))


def test_pipelined_run_errors_are_the_failing_rows_as_in_postgresql(tmp_path: Path) -> None:
    """A pipelined run (taken straight from the buffer) with a Bind that does not decode at row
    600: rows 0..599 get BindComplete + CommandComplete, row 600 its error (no BindComplete:
    the Bind failed), the rest is skipped to Sync, the transaction is aborted and nothing of it
    stays. A duplicate key in the run (of a row there, of an earlier row of the run): its row's
    BindComplete and error after the rows before it, nothing after it, nothing written. Then the
    same connection writes a clean run."""
    from tests.pg_server import start_server

    server = start_server(tmp_path / "db")
    try:
        with changefeed.connect(tmp_path / "db") as conn:
            conn.execute("CREATE TABLE r (id INT PRIMARY KEY, v TEXT, n INT)")
            conn.execute("INSERT INTO r (id, v, n) VALUES (-1, 'old', 0)")
        s = _startup(server)
        prepare = _msg(
            b"P",
            b"ins\x00INSERT INTO r (id, v, n) VALUES ($1, $2, $3)\x00" + struct.pack("!hiii", 3, 20, 25, 20),
        )

        def row(i: int, v: bytes | None = b"value") -> bytes:
            return _run_bind(b"ins", [struct.pack("!q", i), v, None if i % 7 == 0 else struct.pack("!q", i)])

        # A Bind whose int8 is 3 bytes long at row 600.
        s.sendall(_msg(b"Q", b"BEGIN\x00"))
        _read(s, b"Z")
        bad = _run_bind(b"ins", [b"\x00\x00\x01", b"x", None])
        s.sendall(
            prepare
            + b"".join(row(i) for i in range(600))
            + bad
            + b"".join(row(i) for i in range(600, 900))
            + _msg(b"S", b"")
        )
        got = _read(s, b"Z")
        kinds = [k for k, _ in got]
        assert kinds == [b"1"] + [b"2", b"C"] * 600 + [b"E", b"Z"]
        assert b"C22P03\x00" in got[-2][1]
        assert got[-1][1] == b"E"
        s.sendall(_msg(b"Q", b"COMMIT\x00"))
        done = _read(s, b"Z")
        assert [b for k, b in done if k == b"C"] == [b"ROLLBACK\x00"]
        # A duplicate of an existing key at row 300, and a key repeated within the run at row
        # 400: each answers its own Execute, after rows before it completed, as in PostgreSQL.
        for bad_at, bad_row, key in ((300, row(-1), b"-1"), (400, row(150), b"150")):
            s.sendall(_msg(b"Q", b"BEGIN\x00"))
            _read(s, b"Z")
            rows = (
                b"".join(row(i) for i in range(bad_at))
                + bad_row
                + b"".join(row(i) for i in range(1000, 1300))
            )
            s.sendall(rows + _msg(b"S", b""))
            got = _read(s, b"Z")
            assert [k for k, _ in got] == [b"2", b"C"] * bad_at + [b"2", b"E", b"Z"]
            assert b"C23505\x00" in got[-2][1] and b"Key (id)=(" + key + b") already exists" in got[-2][1]
            assert got[-1] == (b"Z", b"E")
            s.sendall(_msg(b"Q", b"ROLLBACK\x00"))
            _read(s, b"Z")
        # The same with the rows arriving in pieces (written in several chunks meanwhile): the
        # error of row 700 answers row 700, the earlier chunks' rows completed.
        s.sendall(_msg(b"Q", b"BEGIN\x00"))
        _read(s, b"Z")
        for lo in range(0, 700, 300):
            s.sendall(b"".join(row(i) for i in range(lo, min(lo + 300, 700))))
            time.sleep(0.05)
        s.sendall(row(-1) + b"".join(row(i) for i in range(1000, 1100)) + _msg(b"S", b""))
        got = _read(s, b"Z")
        assert [k for k, _ in got] == [b"2", b"C"] * 700 + [b"2", b"E", b"Z"]
        s.sendall(_msg(b"Q", b"ROLLBACK\x00"))
        _read(s, b"Z")
        # A clean run with NULLs, empty and non-ASCII text, values holding Execute's own bytes.
        s.sendall(_msg(b"Q", b"BEGIN\x00"))
        _read(s, b"Z")
        texts = [b"value", b"", None, "é😀".encode(), b"E\x00\x00\x00\x09\x00\x00\x00\x00\x00B", b"v" * 300]
        s.sendall(b"".join(row(i, texts[i % len(texts)]) for i in range(1000)) + _msg(b"S", b""))
        got = _read(s, b"Z")
        assert [k for k, _ in got] == [b"2", b"C"] * 1000 + [b"Z"]
        assert all(b == b"INSERT 0 1\x00" for k, b in got if k == b"C")
        s.sendall(_msg(b"Q", b"COMMIT\x00"))
        _read(s, b"Z")
        s.close()
        with changefeed.connect(tmp_path / "db") as conn:
            stored = conn.execute("SELECT id, v, n FROM r ORDER BY id").rows
        assert stored[0] == (-1, "old", 0)
        expect = [
            (i, None if texts[i % 6] is None else texts[i % 6].decode(), None if i % 7 == 0 else i)  # type: ignore[union-attr]
            for i in range(1000)
        ]
        assert stored[1:] == expect
    finally:
        server.stop()


def test_bulk_clients_with_mixed_values_land_with_their_changes(tmp_path: Path) -> None:
    """asyncpg (binary, Bind/Execute in large writes) and psycopg (Bind/Describe/Execute flushed a
    row at a time) write 1,000-row transactions of varying text, NULLs and large and negative
    integers: every row lands, and with it its change in the table's changefeed, in the same
    transaction."""
    import asyncio

    import asyncpg
    import psycopg

    from tests.pg_server import start_server

    server = start_server(tmp_path / "db")
    try:
        with changefeed.connect(tmp_path / "db") as conn:
            conn.execute("CREATE TABLE m (id INT PRIMARY KEY, v TEXT, n INT)")
            conn.execute("ALTER TABLE m ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_IMAGE')")

        def rows(base: int) -> list[tuple[int, str | None, int | None]]:
            return [
                (
                    base + i,
                    None if i % 11 == 0 else f"value {i} " + "é" * (i % 5),
                    None if i % 13 == 0 else (-1) ** i * i * 10**12,
                )
                for i in range(1000)
            ]

        async def with_asyncpg() -> None:
            c = await asyncpg.connect(
                host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
            )
            try:
                for t in range(2):
                    async with c.transaction():
                        await c.executemany("INSERT INTO m (id, v, n) VALUES ($1, $2, $3)", rows(t * 1000))
            finally:
                await c.close()

        asyncio.run(with_asyncpg())
        with psycopg.connect(server.dsn()) as pc:
            for t in range(2, 4):
                with pc.transaction(), pc.cursor() as cur:
                    cur.executemany("INSERT INTO m (id, v, n) VALUES (%s, %s, %s)", rows(t * 1000))
        with changefeed.connect(tmp_path / "db") as conn:
            stored = conn.execute("SELECT id, v, n FROM m ORDER BY id").rows
        assert stored == [r for t in range(4) for r in rows(t * 1000)]
        from changefeed.engine.database import Database

        d = Database(tmp_path / "db", create=False)
        try:
            d.refresh_catalog()
            schema = d.find_table("m")
            assert schema is not None
            per_txn = d.conn.execute(
                f"SELECT tx, count(*) FROM x{schema.id} GROUP BY tx ORDER BY tx"
            ).fetchall()
        finally:
            d.close()
        assert [n for _, n in per_txn] == [1000] * 4  # each row's change, in its own transaction
    finally:
        server.stop()


def test_bulk_run_values_that_do_not_fit_fail_at_their_row(tmp_path: Path) -> None:
    """Binary int8 parameters into an INT4 column (Parse declaring int8, as a client may) and
    asyncpg's text into a STRING(3) one: a run's column is stored unchecked only when all of it
    fits; a value that does not fails its own row with PostgreSQL's code (22003, 22001) after
    the rows before it completed, nothing of the transaction stays, and a run that fits lands."""
    import asyncio

    import asyncpg

    from tests.pg_server import start_server

    server = start_server(tmp_path / "db")
    try:
        with changefeed.connect(tmp_path / "db") as conn:
            conn.execute("CREATE TABLE f (id INT PRIMARY KEY, v STRING(3), n INT4)")
        s = _startup(server)
        prepare = _msg(
            b"P",
            b"ins\x00INSERT INTO f (id, v, n) VALUES ($1, $2, $3)\x00" + struct.pack("!hiii", 3, 20, 25, 20),
        )
        s.sendall(_msg(b"Q", b"BEGIN\x00"))
        _read(s, b"Z")
        n = [-(2**31) + i for i in range(1000)]
        n[700] = 2**31
        s.sendall(
            prepare
            + b"".join(
                _run_bind(b"ins", [struct.pack("!q", i), b"abc", struct.pack("!q", n[i])])
                for i in range(1000)
            )
            + _msg(b"S", b"")
        )
        got = _read(s, b"Z")
        assert [k for k, _ in got] == [b"1"] + [b"2", b"C"] * 700 + [b"2", b"E", b"Z"]
        assert b"C22003\x00" in got[-2][1]
        s.sendall(_msg(b"Q", b"ROLLBACK\x00"))
        _read(s, b"Z")
        s.close()

        async def run() -> None:
            c = await asyncpg.connect(
                host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
            )
            try:
                sql = "INSERT INTO f (id, v, n) VALUES ($1, $2, $3)"
                rows = [(i, "abc", -(2**31) + i) for i in range(1000)]
                rows[300] = (300, "abcd", 1)
                with pytest.raises(asyncpg.PostgresError) as err:
                    async with c.transaction():
                        await c.executemany(sql, rows)
                assert err.value.sqlstate == "22001"
                async with c.transaction():
                    await c.executemany(sql, [(i, "é☃", 2**31 - 1 - i) for i in range(1000)])
            finally:
                await c.close()

        asyncio.run(run())
        with changefeed.connect(tmp_path / "db") as conn:
            stored = conn.execute("SELECT id, v, n FROM f ORDER BY id").rows
        assert stored == [(i, "é☃", 2**31 - 1 - i) for i in range(1000)]
    finally:
        server.stop()


def test_bulk_write_waits_for_another_writer_off_the_loop(tmp_path: Path) -> None:
    """The only session of its process writes its bulk on the loop, but never waits there: while
    another writer holds the write lock, its rows wait on the pool (the loop keeps serving: a
    second connection's point SELECT answers meanwhile), and land once the other commits."""
    import psycopg

    from tests.pg_server import start_server

    server = start_server(tmp_path / "db")
    try:
        with changefeed.connect(tmp_path / "db") as conn:
            conn.execute("CREATE TABLE w (id INT PRIMARY KEY, v TEXT)")
        holder = changefeed.connect(tmp_path / "db")
        holder.session.begin()
        holder.execute("INSERT INTO w (id, v) VALUES (-1, 'holder')")  # holds the write lock
        done = threading.Event()
        failed: list[BaseException] = []

        def bulk() -> None:
            try:
                with psycopg.connect(server.dsn()) as pc, pc.transaction(), pc.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO w (id, v) VALUES (%s, %s)", [(i, f"v{i}") for i in range(1000)]
                    )
            except BaseException as exc:  # reported below
                failed.append(exc)
            finally:
                done.set()

        writer = threading.Thread(target=bulk)
        writer.start()
        time.sleep(0.5)
        assert not done.is_set()  # waiting for the lock
        with psycopg.connect(server.dsn(), autocommit=True) as other:
            assert other.execute("SELECT 1").fetchone() == (1,)  # the loop is not blocked
        holder.session.commit()
        holder.close()
        assert done.wait(30) and not failed, failed
        writer.join(5)
        with changefeed.connect(tmp_path / "db") as conn:
            assert conn.execute("SELECT count(*) FROM w").rows == [(1001,)]
    finally:
        server.stop()
