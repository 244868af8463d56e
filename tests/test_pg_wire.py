"""The PostgreSQL wire protocol against real clients: psql, psycopg 3, asyncpg, the JDBC driver,
and raw sockets for bad input. One server per module (port 0)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

import changefeed
from changefeed.server.pg.server import POOL_SIZE
from tests.pg_server import RunningServer, run_psql, start_server

GOLDEN = Path(__file__).parent / "golden" / "pg"


def check_golden(path: Path, actual: str) -> None:
    """Compare with the golden file; ``UPDATE_GOLDEN=1`` rewrites it (review the diff!)."""
    if os.environ.get("UPDATE_GOLDEN"):
        path.write_text(actual)
    assert actual == path.read_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> RunningServer:
    db = tmp_path_factory.mktemp("pg") / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE USER alice WITH PASSWORD 'wonderland'")
        conn.execute("CREATE USER nopass")
        conn.execute("CREATE TABLE kv (k BIGINT PRIMARY KEY, v TEXT)")
        conn.execute(TYPES_DDL)
        conn.execute("GRANT ALL ON TABLE kv, typed TO alice")
        conn.execute("CREATE USER bob WITH PASSWORD 'builder'")
    srv = start_server(db)
    yield srv
    srv.stop()


def _raw(server: RunningServer) -> socket.socket:
    s = socket.create_connection((server.host, server.port), timeout=10)
    return s


def _startup(user: str = "root", version: int = 196608) -> bytes:
    body = struct.pack("!i", version) + b"user\x00" + user.encode() + b"\x00database\x00defaultdb\x00\x00"
    return struct.pack("!i", len(body) + 4) + body


def _read_until(s: socket.socket, kinds: bytes) -> list[tuple[bytes, bytes]]:
    """Read messages until one whose type is in ``kinds`` (or the socket closes)."""
    out: list[tuple[bytes, bytes]] = []
    buf = b""
    while True:
        while len(buf) >= 5:
            (n,) = struct.unpack("!i", buf[1:5])
            if len(buf) < 1 + n:
                break
            kind, body, buf = buf[:1], buf[5 : 1 + n], buf[1 + n :]
            out.append((kind, body))
            if kind in kinds:
                return out
        chunk = s.recv(65536)
        if not chunk:
            return out
        buf += chunk


def _fields(body: bytes) -> dict[str, str]:
    out = {}
    for part in body.split(b"\x00"):
        if part:
            out[part[:1].decode()] = part[1:].decode()
    return out


# ------------------------------------------------------------------------------------------ psql
def test_psql_script_golden(server: RunningServer, tmp_path: Path) -> None:
    script = GOLDEN / "psql_session.sql"
    proc = run_psql(server, "-f", str(script))
    check_golden(GOLDEN / "psql_session.out", proc.stdout.replace(str(script), "psql_session.sql"))


# --------------------------------------------------------------------------------------- psycopg
TYPES_DDL = (
    "CREATE TABLE typed (id BIGINT PRIMARY KEY, b BOOL, i2 INT2, i4 INT4, i8 INT8, f8 FLOAT8, n DECIMAL(20,6),"
    " s TEXT, bt BYTES, d DATE, ts TIMESTAMP, tz TIMESTAMPTZ, u UUID, tm TIME, j JSONB, iv INTERVAL)"
)
VALUES = (
    True,
    -12,
    123456,
    -(2**62),
    1.0 / 3.0,
    Decimal("-1234567.125000"),
    "héllo, 'wörld'\n",
    b"\x00\x01\xff binary",
    dt.date(1999, 12, 31),
    dt.datetime(2021, 6, 1, 12, 30, 45, 123456),
    dt.datetime(2021, 6, 1, 12, 30, 45, 654321, tzinfo=dt.UTC),
    uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    dt.time(23, 59, 58, 500000),
    dt.timedelta(days=3, hours=4, minutes=5, seconds=6, microseconds=789),
)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_psycopg_round_trips_every_type(server: RunningServer, binary: bool) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        key = 2 if binary else 1
        marks = ", ".join(["%b" if binary else "%t"] * (len(VALUES) + 1))
        with conn.cursor(binary=binary) as cur:
            cur.execute(
                f"INSERT INTO typed (id, b, i2, i4, i8, f8, n, s, bt, d, ts, tz, u, tm, iv) VALUES ({marks})",
                (key, *VALUES),
            )
            cur.execute(
                "SELECT b, i2, i4, i8, f8, n, s, bt, d, ts, tz, u, tm, iv FROM typed WHERE id = %s", (key,)
            )
            row = cur.fetchone()
        assert row == VALUES
        nulls = conn.execute("SELECT j FROM typed WHERE id = %s", (key,)).fetchone()
        assert nulls == (None,)
        conn.execute("UPDATE typed SET j = %s WHERE id = %s", ('{"a": [1, 2]}', key))
        (j,) = conn.execute("SELECT j FROM typed WHERE id = %s", (key,), binary=binary).fetchone()
        assert j == {"a": [1, 2]}


def test_psycopg_status_tags_and_parameters(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(application_name="tagtest"), autocommit=True) as conn:
        info = conn.info
        assert info.parameter_status("server_version") == "13.0.0"
        assert info.parameter_status("integer_datetimes") == "on"
        assert info.parameter_status("application_name") == "tagtest"
        cur = conn.execute("INSERT INTO kv VALUES (1, 'a'), (2, 'b')")
        assert cur.statusmessage == "INSERT 0 2"
        assert conn.execute("UPDATE kv SET v = 'c' WHERE k = 1").statusmessage == "UPDATE 1"
        assert conn.execute("SELECT * FROM kv ORDER BY k").statusmessage == "SELECT 2"
        assert conn.execute("DELETE FROM kv WHERE k = 2").statusmessage == "DELETE 1"
        conn.execute("SET application_name = 'renamed'")
        assert info.parameter_status("application_name") == "renamed"
        assert conn.execute("SHOW application_name").fetchone() == ("renamed",)
        assert conn.execute("SHOW TimeZone").fetchone() == ("UTC",)
        # named prepared statements, executed many times
        for i in range(10, 20):
            conn.execute("INSERT INTO kv VALUES (%s, %s)", (i, f"v{i}"), prepare=True)
        rows = conn.execute("SELECT k FROM kv WHERE k >= %s", (10,), prepare=True).fetchall()
        assert sorted(r[0] for r in rows) == list(range(10, 20))


def test_errors_carry_sqlstate(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cases = {
            "SELEC 1": "42601",
            "SELECT * FROM no_such_table": "42P01",
            "INSERT INTO kv VALUES (1, 'dup')": "23505",
            "SHOW no_such_setting": "42704",
        }
        conn.execute("UPSERT INTO kv VALUES (1, 'x')")
        for sql, code in cases.items():
            with pytest.raises(psycopg.Error) as err:
                conn.execute(sql)
            assert err.value.sqlstate == code, sql
        assert conn.execute("SELECT v FROM kv WHERE k = 1").fetchone() == ("x",)


def test_transactions_and_failed_state(server: RunningServer) -> None:
    ts = psycopg.pq.TransactionStatus
    with psycopg.connect(server.dsn()) as conn, psycopg.connect(server.dsn(), autocommit=True) as other:
        conn.execute("INSERT INTO kv VALUES (100, 'in txn')")
        assert conn.info.transaction_status == ts.INTRANS
        assert other.execute("SELECT count(*) FROM kv WHERE k = 100").fetchone() == (0,)
        conn.commit()
        assert other.execute("SELECT v FROM kv WHERE k = 100").fetchone() == ("in txn",)
        conn.execute("INSERT INTO kv VALUES (101, 'rolled back')")
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute("INSERT INTO kv VALUES (100, 'dup')")
        assert conn.info.transaction_status == ts.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
        assert conn.info.transaction_status == ts.IDLE
        assert other.execute("SELECT count(*) FROM kv WHERE k = 101").fetchone() == (0,)


def test_concurrent_writers_and_readers(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("CREATE TABLE conc (k BIGINT PRIMARY KEY, w BIGINT)")
    errors: list[BaseException] = []
    seen: list[int] = []

    def write(w: int) -> None:
        try:
            with psycopg.connect(server.dsn(), autocommit=True) as c:
                for i in range(40):
                    c.execute("INSERT INTO conc VALUES (%s, %s)", (w * 1000 + i, w))
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            with psycopg.connect(server.dsn(), autocommit=True) as c:
                for _ in range(40):
                    (n,) = c.execute("SELECT count(*) FROM conc").fetchone()  # type: ignore[misc]
                    seen.append(n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors
    assert all(0 <= n <= 160 for n in seen)
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM conc").fetchone() == (160,)


def test_idle_connections_hold_no_threads(server: RunningServer) -> None:
    from changefeed.server.pg.server import POOL_SIZE

    before = threading.active_count()
    idle = [psycopg.connect(server.dsn(), autocommit=True) for _ in range(60)]
    try:
        assert threading.active_count() <= max(before, POOL_SIZE + 4)
        assert idle[-1].execute("SELECT 1").fetchone() == (1,)
    finally:
        for c in idle:
            c.close()


# --------------------------------------------------------------------------------- authentication
def test_scram_password_authentication(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice", "wonderland")) as conn:
        assert conn.execute("SHOW session_authorization").fetchone() == ("alice",)
        assert conn.info.parameter_status("is_superuser") == "off"
    for user, password in (("alice", "wrong"), ("mallory", "x"), ("nopass", "anything")):
        with pytest.raises(psycopg.OperationalError) as err:
            psycopg.connect(server.dsn(user, password))
        assert f'password authentication failed for user "{user}"' in str(err.value)
    import asyncpg

    async def code_of(user: str, password: str) -> str:
        try:
            conn = await asyncpg.connect(
                host=server.host, port=server.port, user=user, password=password, database="x", ssl=False
            )
        except asyncpg.PostgresError as exc:
            return f"{exc.sqlstate} {exc}"
        await conn.close()
        return "connected"

    assert asyncio.run(code_of("alice", "wrong")) == '28P01 password authentication failed for user "alice"'
    assert asyncio.run(code_of("mallory", "x")) == '28P01 password authentication failed for user "mallory"'
    assert asyncio.run(code_of("alice", "wonderland")) == "connected"


def test_privileges_over_the_wire(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("bob", "builder"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as err:
            conn.execute("SELECT * FROM kv")
        assert err.value.sqlstate == "42501"
        assert "bob" in str(err.value)
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the connection goes on


# ---------------------------------------------------------------------------------------- asyncpg
def test_asyncpg_connects_and_queries(server: RunningServer) -> None:
    import asyncpg

    async def go() -> list[tuple[object, ...]]:
        conn = await asyncpg.connect(
            host=server.host,
            port=server.port,
            user="alice",
            password="wonderland",
            database="defaultdb",
            ssl=False,
        )
        try:
            await conn.execute("UPSERT INTO kv VALUES (500, 'from asyncpg')")
            rows = await conn.fetch("SELECT k, v FROM kv WHERE k = 500")
            one = await conn.fetchval("SELECT v FROM kv WHERE k = $1", 500)
            assert one == "from asyncpg"
            await conn.execute(
                "UPSERT INTO typed (id, n, tz, u) VALUES ($1, $2, $3, $4)",
                501,
                Decimal("2.5"),
                VALUES[10],
                VALUES[11],
            )
            got = await conn.fetchrow("SELECT n, tz, u FROM typed WHERE id = $1", 501)
            assert tuple(got) == (Decimal("2.500000"), VALUES[10], VALUES[11])
            return [tuple(r) for r in rows]
        finally:
            await conn.close()

    assert asyncio.run(go()) == [(500, "from asyncpg")]


def test_with_queries_and_grouping_over_the_wire(server: RunningServer) -> None:
    """A WITH query, a derived table and GROUP BY a position through psycopg (simple and
    prepared) and asyncpg (described before it runs); a grouping error is its SQLSTATE."""
    import asyncpg

    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("UPSERT INTO kv VALUES (700, 'w'), (701, 'w'), (702, 'x')")
        sql = "WITH w AS (SELECT k, v FROM kv WHERE k >= %s) SELECT v, count(*) FROM w GROUP BY 1 ORDER BY 1"
        assert conn.execute(sql, (700,)).fetchall() == [("w", 2), ("x", 1)]
        assert conn.execute(sql, (700,), prepare=True).fetchall() == [("w", 2), ("x", 1)]
        got = conn.execute("SELECT d.v FROM (SELECT v FROM kv WHERE k = 702) AS d").fetchall()
        assert got == [("x",)]
        with pytest.raises(psycopg.errors.GroupingError):
            conn.execute("SELECT v, k FROM kv WHERE k >= 700 GROUP BY v")

    async def go() -> list[tuple[object, ...]]:
        c = await asyncpg.connect(
            host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
        )
        try:
            stmt = await c.prepare("WITH w AS (SELECT k FROM kv WHERE k >= $1) SELECT count(*) AS n FROM w")
            assert [(a.name, a.type.name) for a in stmt.get_attributes()] == [("n", "int8")]
            return [tuple(r) for r in await stmt.fetch(701)]
        finally:
            await c.close()

    assert asyncio.run(go()) == [(2,)]


def test_array_columns_reach_asyncpg_and_psycopg_as_lists(server: RunningServer) -> None:
    """Array columns go out as PostgreSQL arrays (int8[], text[] ..); asyncpg learns the types it
    has no codec for through its own introspection query (``server/pg/type_lookup.py``)."""
    import asyncpg

    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS arr (id INT PRIMARY KEY, ta TEXT[], ia INT[], da DATE[])")
        conn.execute("UPSERT INTO arr VALUES (1, '{\"y,z\",NULL}', '{1,2}', '{2024-01-02}')")
        for binary in (False, True):
            got = conn.cursor(binary=binary).execute("SELECT ta, ia, da FROM arr").fetchall()
            assert got == [(["y,z", None], [1, 2], [dt.date(2024, 1, 2)])]

    async def go() -> list[tuple[object, ...]]:
        c = await asyncpg.connect(
            host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
        )
        try:
            return [tuple(r) for r in await c.fetch("SELECT ta, ia, da, ARRAY[1.5] FROM arr")]
        finally:
            await c.close()

    assert asyncio.run(go()) == [(["y,z", None], [1, 2], [dt.date(2024, 1, 2)], [Decimal("1.5")])]


def test_asyncpg_gets_errors_of_a_statement_it_prepares(server: RunningServer) -> None:
    """asyncpg prepares with Parse, Describe and Flush (no Sync) and waits for the answer: an
    error must be sent at once, although the messages after it up to Sync are skipped."""
    import asyncpg

    async def go() -> None:
        conn = await asyncpg.connect(
            host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
        )
        try:
            with pytest.raises(asyncpg.PostgresSyntaxError):
                await asyncio.wait_for(conn.prepare("SELEC 1"), 10)
            with pytest.raises(asyncpg.PostgresSyntaxError):
                await asyncio.wait_for(conn.fetch("SELECT FROM WHERE"), 10)
            with pytest.raises(asyncpg.UndefinedTableError):
                await asyncio.wait_for(conn.fetch("SELECT * FROM no_such_table WHERE k = $1", 1), 10)
            assert await asyncio.wait_for(conn.fetchval("SELECT count(*) FROM kv WHERE k = $1", -1), 10) == 0
        finally:
            await conn.close()

    asyncio.run(go())


# ------------------------------------------------------------------------------------------- JDBC
JDBC_JAR = Path("/usr/share/java/postgresql.jar")
JAVA_MAIN = """
import java.sql.*;
public class Main {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], "alice", "wonderland")) {
            try (Statement s = c.createStatement()) { s.execute("UPSERT INTO kv VALUES (700, 'jdbc')"); }
            try (PreparedStatement p = c.prepareStatement("SELECT k, v FROM kv WHERE k = ?")) {
                p.setLong(1, 700);
                try (ResultSet r = p.executeQuery()) { while (r.next()) System.out.println(r.getLong(1) + "=" + r.getString(2)); }
            }
            System.out.println(c.getMetaData().getDatabaseProductVersion());
        }
    }
}
"""


def test_jdbc_connects_and_queries(server: RunningServer, tmp_path: Path) -> None:
    assert JDBC_JAR.exists() and shutil.which("java"), (
        "the PostgreSQL JDBC driver (Debian libpostgresql-jdbc-java) or java is missing: make setup installs it"
    )
    src = tmp_path / "Main.java"
    src.write_text(JAVA_MAIN)
    url = f"jdbc:postgresql://{server.host}:{server.port}/defaultdb?sslmode=disable"
    proc = subprocess.run(
        ["java", "-cp", str(JDBC_JAR), str(src), url], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:2] == ["700=jdbc", "13.0.0"]


JAVA_BATCH = """
import java.sql.*;
public class Batch {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], "alice", "wonderland")) {
            String table = args[1];
            try (Statement s = c.createStatement()) { s.execute("CREATE TABLE " + table + " (id INT PRIMARY KEY, v TEXT, n INT)"); }
            c.setAutoCommit(false);
            try (PreparedStatement p = c.prepareStatement("INSERT INTO " + table + " (id, v, n) VALUES (?, ?, ?)")) {
                for (int round = 0; round < 3; round++) {
                    for (int i = 0; i < 700; i++) {
                        p.setLong(1, round * 1000 + i); p.setString(2, "r" + round + "." + i); p.setLong(3, i);
                        p.addBatch();
                    }
                    int[] counts = p.executeBatch();
                    c.commit();
                    System.out.println("batch " + counts.length + " " + java.util.Arrays.stream(counts).sum());
                }
                for (int i = 0; i < 300; i++) { p.setLong(1, 5000 + i); p.setString(2, "x"); p.setLong(3, i); p.addBatch(); }
                p.setLong(1, 1002); p.setString(2, "dup"); p.setLong(3, 0); p.addBatch();
                try { p.executeBatch(); System.out.println("no error"); }
                catch (BatchUpdateException e) { System.out.println("error " + e.getSQLState()); c.rollback(); }
            }
            try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT count(*), sum(n), max(v) FROM " + table)) {
                r.next(); System.out.println("rows " + r.getLong(1) + " " + r.getLong(2) + " " + r.getString(3));
            }
            c.commit();
        }
    }
}
"""


@pytest.mark.parametrize("rewrite", [False, True])
def test_jdbc_batches_are_written_whole(server: RunningServer, tmp_path: Path, rewrite: bool) -> None:
    """pgjdbc's executeBatch: Bind/Describe/Execute per row with a row limit of 1, a Sync every
    256 rows; with reWriteBatchedInserts, multi-row INSERTs of parameters. Both are written as
    bulk writes (a row limit does not matter to a statement that returns no rows); a duplicate
    key fails the batch with 23505 and the rollback leaves nothing of it."""
    assert JDBC_JAR.exists() and shutil.which("java"), (
        "the PostgreSQL JDBC driver (Debian libpostgresql-jdbc-java) or java is missing: make setup installs it"
    )
    src = tmp_path / "Batch.java"
    src.write_text(JAVA_BATCH)
    table = "jb_rewrite" if rewrite else "jb_plain"
    url = f"jdbc:postgresql://{server.host}:{server.port}/defaultdb?sslmode=disable&reWriteBatchedInserts={str(rewrite).lower()}"
    proc = subprocess.run(
        ["java", "-cp", str(JDBC_JAR), str(src), url, table], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    # With reWriteBatchedInserts pgjdbc reports SUCCESS_NO_INFO (-2) for each row of a rewritten batch.
    per_row = -2 if rewrite else 1
    assert proc.stdout.splitlines() == [
        *[f"batch 700 {700 * per_row}"] * 3,
        "error 23505",
        f"rows 2100 {3 * sum(range(700))} r2.99",
    ]


# -------------------------------------------------------------------------------------- bad input
def test_unknown_protocol_version(server: RunningServer) -> None:
    with _raw(server) as s:
        s.sendall(_startup(version=(2 << 16)))
        kind, body = _read_until(s, b"E")[-1]
        assert kind == b"E" and _fields(body)["C"] == "0A000"
        assert "unsupported frontend protocol 2.0" in _fields(body)["M"]


def test_ssl_refused_cleanly_without_certificates(server: RunningServer) -> None:
    with _raw(server) as s:
        s.sendall(struct.pack("!ii", 8, 80877103))
        assert s.recv(1) == b"N"
        s.sendall(_startup())
        msgs = _read_until(s, b"Z")
        assert msgs[-1] == (b"Z", b"I")


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(lambda: struct.pack("!i", 3), id="startup-length-too-small"),
        pytest.param(lambda: struct.pack("!i", 100_000_000), id="startup-oversized"),
        pytest.param(lambda: struct.pack("!ii", 17, 196608) + b"user\x00root", id="startup-unterminated"),
    ],
)
def test_bad_startup_packets(server: RunningServer, payload: object) -> None:
    with _raw(server) as s:
        s.sendall(payload())  # type: ignore[operator]
        msgs = _read_until(s, b"E")
        if msgs:  # an error, then the connection closes
            assert _fields(msgs[-1][1])["C"] in ("08P01", "0A000")
        assert s.recv(10) == b""


@pytest.mark.parametrize(
    "message,code",
    [
        (b"Q" + struct.pack("!i", 2), "08P01"),  # length smaller than itself
        (b"Q" + struct.pack("!i", 64 * 1024 * 1024 + 100), "08P01"),  # oversized
        (b"P" + struct.pack("!i", 6) + b"a\x00", "08P01"),  # truncated Parse
        (b"?" + struct.pack("!i", 4), "08P01"),  # unknown message type
    ],
    ids=["short-length", "oversized", "truncated-parse", "unknown-type"],
)
def test_bad_messages_after_startup(server: RunningServer, message: bytes, code: str) -> None:
    with _raw(server) as s:
        s.sendall(_startup())
        _read_until(s, b"Z")
        s.sendall(message)
        msgs = _read_until(s, b"E")
        assert msgs and _fields(msgs[-1][1])["C"] == code
    # and the server still serves others
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def _threads_and_fds() -> tuple[int, int]:
    return threading.active_count(), len(os.listdir("/proc/self/fd"))


def test_many_connect_disconnect_cycles_leak_nothing(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("SELECT 1")
    time.sleep(0.2)
    before = _threads_and_fds()
    for i in range(1000):
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("SELECT v FROM kv WHERE k = %s", (i,))
        with _raw(server) as s:  # and some that drop the connection mid-startup
            s.sendall(_startup()[:7])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _threads_and_fds()[1] > before[1] + 2:
        time.sleep(0.1)
    after = _threads_and_fds()
    # no thread per connection: the statement pool starts its threads lazily, up to POOL_SIZE
    assert after[0] <= before[0] + POOL_SIZE, (before, after)
    assert after[1] <= before[1] + 2, (before, after)


def test_client_that_stops_reading_does_not_block_others(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS wide (k BIGINT PRIMARY KEY, v TEXT)")
        with conn.cursor() as cur:
            cur.executemany("UPSERT INTO wide VALUES (%s, %s)", [(i, "x" * 2000) for i in range(1000)])
    s = _raw(server)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.sendall(_startup())
    _read_until(s, b"Z")
    q = b"SELECT * FROM wide\x00"
    s.sendall(b"Q" + struct.pack("!i", len(q) + 4) + q)  # and never read the ~2 MB answer
    time.sleep(0.5)
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM wide").fetchone() == (1000,)
    s.close()
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_cancel_request_on_idle_connection_is_harmless(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.cancel_safe()  # cancel() holds the GIL in libpq, and this server runs in-process
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SHOW QUERIES").fetchall() == [] or True


def test_show_queries_lists_running_statements(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        rows = conn.execute("SHOW QUERIES").fetchall()
        assert any("SHOW QUERIES" in r[5] for r in rows)
        with pytest.raises(psycopg.Error) as err:
            conn.execute("CANCEL QUERY '00000000000000000000000000000000'")
        assert err.value.sqlstate == "42704"


def test_create_changefeed_into_returns_job_id(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cur = conn.execute("CREATE CHANGEFEED FOR kv INTO 'topics://'")
        assert [c.name for c in cur.description or ()] == ["job_id"]
        (job_id,) = cur.fetchone()  # type: ignore[misc]
        assert isinstance(job_id, int)
        jobs = conn.execute("SHOW CHANGEFEED JOBS").fetchall()
        assert any(row[0] == job_id for row in jobs)


@pytest.mark.parametrize("how", ["cancel-request", "cancel-query"])
def test_core_changefeed_over_the_wire(server: RunningServer, how: str) -> None:
    table = f"feed_{how.replace('-', '_')}"
    with psycopg.connect(server.dsn(), autocommit=True) as w:
        w.execute(f"CREATE TABLE {table} (a BIGINT PRIMARY KEY, b TEXT)")
        conn = psycopg.connect(server.dsn(), autocommit=True)
        got: list[tuple[object, ...]] = []
        errors: list[BaseException] = []

        def consume() -> None:
            try:
                with conn.cursor() as cur:
                    # the CANCEL QUERY case reads in binary: key and value arrive as raw bytes
                    sql = f"EXPERIMENTAL CHANGEFEED FOR {table}"
                    for row in cur.stream(sql, binary=how == "cancel-query"):
                        got.append(row)
            except psycopg.Error as exc:
                errors.append(exc)

        th = threading.Thread(target=consume)
        th.start()
        time.sleep(1.0)
        w.execute(f"INSERT INTO {table} VALUES (1, 'one')")
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
        assert got == [(table, b"[1]", b'{"after": {"a": 1, "b": "one"}}')]
        feeds = [r for r in w.execute("SHOW QUERIES").fetchall() if "EXPERIMENTAL CHANGEFEED" in r[5]]
        assert len(feeds) == 1
        if how == "cancel-request":
            conn.cancel_safe()
        else:
            w.execute(f"CANCEL QUERY '{feeds[0][0]}'")
        th.join(20)
        assert not th.is_alive()
        assert errors and isinstance(errors[0], psycopg.errors.QueryCanceled)
        assert conn.execute("SELECT count(*) FROM " + table).fetchone() == (1,)  # the connection goes on
        conn.close()
        w.execute(
            f"INSERT INTO {table} VALUES (2, 'two')"
        )  # the abandoned feed thread ends at its next message
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
        t.name.startswith("pg-changefeed") for t in threading.enumerate()
    ):
        time.sleep(0.1)
    assert not any(t.name.startswith("pg-changefeed") for t in threading.enumerate())


def test_core_changefeed_ends_when_the_client_disconnects(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as w:
        w.execute("CREATE TABLE feed_gone (a BIGINT PRIMARY KEY)")
        s = _raw(server)
        s.sendall(_startup())
        _read_until(s, b"Z")
        q = b"EXPERIMENTAL CHANGEFEED FOR feed_gone\x00"
        s.sendall(b"Q" + struct.pack("!i", len(q) + 4) + q)
        assert _read_until(s, b"T")[-1][0] == b"T"
        s.close()
        time.sleep(1.0)
        w.execute("INSERT INTO feed_gone VALUES (1)")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
            t.name.startswith("pg-changefeed") for t in threading.enumerate()
        ):
            time.sleep(0.1)
        assert not any(t.name.startswith("pg-changefeed") for t in threading.enumerate())
        assert not [r for r in w.execute("SHOW QUERIES").fetchall() if "feed_gone" in r[5]]


# ------------------------------------------------------------------------------------ shutdown
def test_sigterm_rolls_back_open_transactions_and_exits_zero(tmp_path: Path) -> None:
    import signal
    import sys

    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (k BIGINT PRIMARY KEY)")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), "--pg", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "pg: listening on" in line, line
        port = int(line.rsplit(":", 1)[1])
        dsn = f"host=127.0.0.1 port={port} user=root dbname=defaultdb sslmode=disable"
        with psycopg.connect(dsn, autocommit=True) as a:
            a.execute("INSERT INTO t VALUES (1)")
        b = psycopg.connect(dsn)
        b.execute("INSERT INTO t VALUES (2)")  # left open: BEGIN ... no COMMIT
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        b.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with changefeed.connect(db) as conn:
        assert conn.execute("SELECT k FROM t").rows == [(1,)]


# ---------------------------------------------------------------------------------- CQL and TLS
def test_cql_tables_read_over_sql(server: RunningServer) -> None:
    with changefeed.connect(server.db, dialect="cql") as cql:
        cql.execute(
            "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        cql.execute("CREATE TABLE IF NOT EXISTS ks.events (pk int, ck int, v text, PRIMARY KEY (pk, ck))")
        cql.execute("INSERT INTO ks.events (pk, ck, v) VALUES (1, 2, 'cql row')")
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT pk, ck, v FROM ks.events").fetchall() == [(1, 2, "cql row")]
        cols = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'ks' AND table_name = 'events' ORDER BY ordinal_position"
        ).fetchall()
        assert cols == [("pk", "integer"), ("ck", "integer"), ("v", "text")]


def test_tls_with_certs_dir(tmp_path: Path) -> None:
    assert shutil.which("openssl"), "openssl is needed to make a test certificate"
    certs = tmp_path / "certs"
    certs.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-keyout", str(certs / "node.key"), "-out", str(certs / "node.crt")],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    srv = start_server(tmp_path / "db", certs_dir=certs)
    try:
        dsn = f"host={srv.host} port={srv.port} user=root dbname=defaultdb sslmode=require"
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.info.pgconn.ssl_in_use
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        srv.stop()
