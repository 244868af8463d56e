"""The CQL endpoint through real clients: ScyllaDB's Python driver (scylla-driver) and cqlsh
(scylla-cqlsh), both installed by `make setup`; plus raw frames for what drivers never send."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cassandra import AuthenticationFailed, InvalidRequest, Unauthorized
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable, Session
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
from cassandra.protocol import SyntaxException
from cassandra.query import UNSET_VALUE, BatchStatement, BatchType, SimpleStatement

import changefeed
from changefeed.cli.render import render_cql
from changefeed.engine.clock import timeuuid_key
from changefeed.server.cql import session as cql_session
from changefeed.sql.result import Result
from tests.cql_server import RunningServer, run_cqlsh, split_cql, start_server
from tests.golden_files import read_golden

GOLDEN = sorted((Path(__file__).parent / "golden" / "scylla").glob("*.cql"))
#: Log rows for the paging test (make test); `make soak` reads 100,000.
PAGING_ROWS = int(os.environ.get("CHANGEFEED_CQL_PAGING_ROWS", "20000"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    srv = start_server(tmp_path_factory.mktemp("cql") / "db")
    yield srv
    srv.stop()


def cluster(srv: RunningServer, **kw: Any) -> Cluster:
    """A driver cluster with its default token-aware policy, set explicitly."""
    profile = ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()))
    return Cluster([srv.host], port=srv.port, execution_profiles={EXEC_PROFILE_DEFAULT: profile}, **kw)


@pytest.fixture(scope="module")
def cql(server: RunningServer) -> Iterator[Session]:
    c = cluster(server)
    s = c.connect()
    yield s
    c.shutdown()


def render(rs: Any) -> str:
    rows = [tuple(r) for r in rs]
    return render_cql(Result(columns=list(rs.column_names or []), rows=rows))


def drop_t(s: Session) -> None:
    for name in ("t",):
        s.execute(f"DROP TABLE IF EXISTS ks.{name}")


# ---------------------------------------------------------------------- the spec's examples
@pytest.mark.parametrize("path", GOLDEN, ids=[p.stem for p in GOLDEN])
def test_spec_examples_through_the_python_driver(cql: Session, path: Path) -> None:
    drop_t(cql)
    for step in read_golden(path):
        rs = None
        for stmt in split_cql(step.statements):
            rs = cql.execute(stmt)
        if step.expected is not None:
            assert rs is not None
            assert render(rs) == step.expected, f"after:\n{step.statements}"


def test_spec_examples_throughrun_cqlsh(server: RunningServer) -> None:
    """Every example file through cqlsh, its output exactly as the document prints it. Each file
    gets its own table (``ks.t`` renamed ``ks.t01`` ...), so all of them run in one cqlsh session:
    the tables are created first, then the rest runs. (A table's CDC log reaches a driver's
    metadata through a schema-change event, as with ScyllaDB, and cqlsh needs that metadata to
    print a SELECT: the CREATE TABLE answers once the subscribed drivers re-read the log.)"""
    ddl: list[str] = []
    rest: list[str] = []
    expected: list[str] = []
    for n, path in enumerate(GOLDEN, 1):
        steps = read_golden(path)
        for step in steps:
            for stmt in split_cql(
                re.sub(
                    r"\bks\.t(_scylla_cdc_log)?\b",
                    lambda m, n=n: f"ks.t{n:02d}{m.group(1) or ''}",
                    step.statements,
                )
            ):
                (ddl if stmt.lstrip().upper().startswith("CREATE") else rest).append(stmt)
            if step.expected is not None:
                expected.append(_as_cqlsh_prints(step.expected))
    out = run_cqlsh(server, "".join(s + ";\n" for s in ddl + rest))
    assert not out.stderr, out.stderr
    assert out.stdout.strip("\n") == "\n\n".join(expected)


def test_a_cqlsh_script_reads_the_log_of_the_table_it_creates(server: RunningServer, tmp_path: Path) -> None:
    """One cqlsh script (``-e`` with several statements, or ``-f``) creates a CDC table and reads
    its log: the CREATE TABLE sends the log table's CREATED event with the base table's (as
    ScyllaDB's notifier does) and answers once cqlsh's driver has re-read the log's schema, so
    cqlsh finds the log in its metadata to print the rows."""
    for n, how in enumerate(("-e", "-f")):
        script = (
            f"CREATE TABLE ks.script{n} (pk int, ck int, v int, PRIMARY KEY (pk, ck)) WITH cdc = {{'enabled': true}};\n"
            f"INSERT INTO ks.script{n} (pk, ck, v) VALUES (1, 2, 3);\n"
            f'SELECT "cdc$batch_seq_no", "cdc$operation", pk, ck, v FROM ks.script{n}_scylla_cdc_log'
        )
        if how == "-e":
            out = run_cqlsh(server, "", "-e", script)
        else:
            path = tmp_path / "script.cql"
            path.write_text(script + ";\n")
            out = run_cqlsh(server, "", "-f", str(path))
        assert out.returncode == 0 and not out.stderr, (how, out.stderr)
        lines = [x.strip() for x in out.stdout.splitlines() if x.strip()]
        assert lines[-2:] == ["0 |             2 |  1 |  2 | 3", "(1 rows)"], (how, out.stdout)
    # a log that an ALTER TABLE creates, the same way
    script = (
        "CREATE TABLE ks.altered (pk int PRIMARY KEY, v int);\n"
        "ALTER TABLE ks.altered WITH cdc = {'enabled': true};\n"
        "INSERT INTO ks.altered (pk, v) VALUES (7, 8);\n"
        "SELECT pk, v FROM ks.altered_scylla_cdc_log"
    )
    out = run_cqlsh(server, "", "-e", script)
    assert out.returncode == 0 and not out.stderr, out.stderr
    assert [x.strip() for x in out.stdout.splitlines() if x.strip()][-2:] == ["7 | 8", "(1 rows)"]


def _as_cqlsh_prints(block: str) -> str:
    """The document's block as cqlsh prints it: cqlsh ends an empty result's table with one more
    blank line (print_formatted_result's row-less branch) before ``(0 rows)``."""
    return block.replace("\n\n(0 rows)", "\n\n\n(0 rows)")


def test_cqlsh_describe_and_show_version(server: RunningServer, cql: Session) -> None:
    drop_t(cql)
    cql.execute(
        "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    cql.execute(
        "CREATE TABLE ks.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    out = run_cqlsh(server, "DESCRIBE TABLE ks.t;\nDESCRIBE KEYSPACES;\nSHOW VERSION;\n")
    assert out.returncode == 0, out.stderr
    assert (
        "CREATE TABLE ks.t (\n    pk int,\n    ck int,\n    v text,\n    PRIMARY KEY (pk, ck)\n)"
        in out.stdout
    )
    assert "ks" in out.stdout and "system_schema" in out.stdout
    assert "Native protocol v4" in out.stdout


# ---------------------------------------------------------------------- driver features
def test_driver_downgrades_from_v5_and_routes_by_token(server: RunningServer) -> None:
    c = cluster(server)  # protocol_version unset: the driver starts at v5
    try:
        s = c.connect()
        assert c.protocol_version == 4
        tm = c.metadata.token_map
        assert tm is not None and len(tm.ring) == 16
        s.execute(
            "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        assert len(tm.get_replicas("ks", tm.ring[3])) <= 1
    finally:
        c.shutdown()


ALL_TYPES = [
    ("a_ascii", "ascii", "abc"),
    ("a_bigint", "bigint", -(2**62)),
    ("a_blob", "blob", b"\x00\xff"),
    ("a_boolean", "boolean", True),
    ("a_date", "date", dt.date(2024, 2, 29)),
    ("a_decimal", "decimal", Decimal("-12.345")),
    ("a_double", "double", 1.5e300),
    ("a_duration", "duration", None),
    ("a_float", "float", 0.25),
    ("a_inet", "inet", "10.1.2.3"),
    ("a_int", "int", -7),
    ("a_smallint", "smallint", 300),
    ("a_text", "text", "zürich ✓"),
    ("a_time", "time", None),
    ("a_timestamp", "timestamp", dt.datetime(2024, 5, 6, 7, 8, 9, 123000)),
    ("a_timeuuid", "timeuuid", uuid.UUID("e70eb53a-e97f-11f1-9100-80c6082ee17a")),
    ("a_tinyint", "tinyint", -3),
    ("a_uuid", "uuid", uuid.UUID("12345678-1234-5678-1234-567812345678")),
    ("a_varchar", "varchar", "v"),
    ("a_varint", "varint", 2**80),
]


def test_prepared_statements_bind_every_type(cql: Session) -> None:
    cols = ", ".join(f"{n} {t}" for n, t, _ in ALL_TYPES)
    cql.execute("DROP TABLE IF EXISTS ks.types")
    cql.execute(f"CREATE TABLE ks.types (k int PRIMARY KEY, {cols}) WITH cdc = {{'enabled': true}}")
    names = [n for n, _, _ in ALL_TYPES]
    insert = cql.prepare(
        f"INSERT INTO ks.types (k, {', '.join(names)}) VALUES (?, {', '.join('?' * len(names))})"
    )
    assert [c.name for c in insert.column_metadata][:2] == ["k", "a_ascii"]
    from cassandra.util import Duration, Time

    values = []
    for _, t, v in ALL_TYPES:
        if t == "duration":
            v = Duration(0, 2, 3_000_000_000)
        elif t == "time":
            v = Time(dt.time(13, 14, 15, 16))
        values.append(v)
    cql.execute(insert, [1, *values])
    row = cql.execute(cql.prepare("SELECT * FROM ks.types WHERE k = ?"), [1]).one()
    for (name, t, v), sent in zip(ALL_TYPES, values, strict=True):
        got = getattr(row, name)
        if t == "timestamp":
            assert got == v
        elif t == "duration":
            assert (got.days, got.nanoseconds) == (2, 3_000_000_000)
        elif t == "time":
            assert got == sent
        elif t == "float":
            assert got == pytest.approx(v)
        else:
            assert got == v, name
    log = cql.execute("SELECT a_varint, a_decimal FROM ks.types_scylla_cdc_log").one()
    assert (log.a_varint, log.a_decimal) == (2**80, Decimal("-12.345"))


def test_batches_are_one_cdc_batch(cql: Session) -> None:
    drop_t(cql)
    cql.execute(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    ins = cql.prepare("INSERT INTO ks.t (pk, ck, v) VALUES (?, ?, ?)")
    for kind in (BatchType.LOGGED, BatchType.UNLOGGED):
        b = BatchStatement(batch_type=kind)
        b.add(ins, (1, 1, 1))
        b.add(ins, (1, 2, 2))
        b.add(SimpleStatement("UPDATE ks.t SET v = 9 WHERE pk = 2 AND ck = 0"))
        cql.execute(b)
    rows = list(
        cql.execute(
            'SELECT "cdc$time", "cdc$batch_seq_no", "cdc$end_of_batch", pk, ck FROM ks.t_scylla_cdc_log'
        )
    )
    by_pk1 = [r for r in rows if r.pk == 1]
    assert [r.cdc_batch_seq_no for r in by_pk1] == [0, 1, 0, 1]
    assert by_pk1[0].cdc_time == by_pk1[1].cdc_time != by_pk1[2].cdc_time
    assert [r.cdc_end_of_batch for r in by_pk1] == [None, True, None, True]


def test_unset_values_leave_their_columns_alone(cql: Session) -> None:
    """The drivers' UNSET_VALUE (and a named marker left out) writes nothing to its column, as in
    ScyllaDB; it was once written as null, wiping the column."""
    cql.execute("DROP TABLE IF EXISTS ks.un")
    cql.execute("CREATE TABLE ks.un (pk int PRIMARY KEY, a text, b text) WITH cdc = {'enabled': true}")
    cql.execute("INSERT INTO ks.un (pk, a, b) VALUES (1, 'A', 'B')")
    ins = cql.prepare("INSERT INTO ks.un (pk, a, b) VALUES (?, ?, ?) USING TTL ?")
    cql.execute(ins, (1, UNSET_VALUE, "B2", UNSET_VALUE))
    cql.execute(cql.prepare("UPDATE ks.un SET a = ?, b = ? WHERE pk = ?"), ("A3", UNSET_VALUE, 1))
    cql.execute(cql.prepare("UPDATE ks.un SET a = ? WHERE pk = ?"), (UNSET_VALUE, 1))  # nothing to do
    cql.execute(cql.prepare("UPDATE ks.un SET b = :b WHERE pk = :pk"), {"pk": 1})  # :b left out
    batch = BatchStatement()
    batch.add(ins, (2, "x", UNSET_VALUE, UNSET_VALUE))
    batch.add(cql.prepare("UPDATE ks.un SET b = ? WHERE pk = ?"), (UNSET_VALUE, 1))
    cql.execute(batch)
    assert sorted(tuple(r) for r in cql.execute("SELECT pk, a, b FROM ks.un")) == [
        (1, "A3", "B2"),
        (2, "x", None),
    ]
    log = [(r.pk, r.a, r.b) for r in cql.execute("SELECT pk, a, b FROM ks.un_scylla_cdc_log")]
    # (a column a statement did not write is null in its log row)
    assert sorted(log, key=repr) == sorted(
        [(1, "A", "B"), (1, None, "B2"), (1, "A3", None), (2, "x", None)], key=repr
    )
    with pytest.raises(InvalidRequest, match="Invalid unset value for column b"):
        cql.execute(cql.prepare("SELECT * FROM ks.un WHERE pk = 1 AND b = ? ALLOW FILTERING"), (UNSET_VALUE,))


def test_counters_are_incremented_never_set(cql: Session) -> None:
    cql.execute("DROP TABLE IF EXISTS ks.cnt")
    cql.execute("CREATE TABLE ks.cnt (pk int PRIMARY KEY, hits counter)")
    cql.execute("UPDATE ks.cnt SET hits = hits + 1 WHERE pk = 1")
    cql.execute(cql.prepare("UPDATE ks.cnt SET hits = hits + ? WHERE pk = ?"), (10, 1))
    batch = BatchStatement(batch_type=BatchType.COUNTER)
    batch.add(cql.prepare("UPDATE ks.cnt SET hits = hits - ? WHERE pk = ?"), (3, 2))
    cql.execute(batch)
    assert sorted(tuple(r) for r in cql.execute("SELECT pk, hits FROM ks.cnt")) == [(1, 11), (2, -3)]
    with pytest.raises(InvalidRequest, match="Cannot set the value of counter column hits"):
        cql.execute("UPDATE ks.cnt SET hits = 5 WHERE pk = 1")
    with pytest.raises(InvalidRequest, match="INSERT statements are not allowed on counter tables"):
        cql.execute("INSERT INTO ks.cnt (pk, hits) VALUES (3, 1)")
    cql.execute("DROP TABLE IF EXISTS ks.plain")
    cql.execute("CREATE TABLE ks.plain (pk int PRIMARY KEY, w int)")
    with pytest.raises(InvalidRequest, match=r"Invalid operation \(w = w \+ 1\) for non counter column w"):
        cql.execute("UPDATE ks.plain SET w = w + 1 WHERE pk = 1")


def test_timeuuid_bounds_pick_a_window_of_the_log(cql: Session) -> None:
    """minTimeuuid/maxTimeuuid (how a reader picks a time range of a CDC log), dateOf, uuid(),
    blobAsText/textAsBlob, as in ScyllaDB."""
    cql.execute("DROP TABLE IF EXISTS ks.win")
    cql.execute("CREATE TABLE ks.win (pk int PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
    cql.execute("INSERT INTO ks.win (pk, v) VALUES (1, 'a')")
    time.sleep(0.01)
    between = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=1)
    while dt.datetime.now(dt.UTC) < between + dt.timedelta(milliseconds=5):
        time.sleep(0.01)
    cql.execute("INSERT INTO ks.win (pk, v) VALUES (2, 'b')")
    at = between.strftime("%Y-%m-%d %H:%M:%S+0000")
    log = "SELECT pk FROM ks.win_scylla_cdc_log WHERE \"cdc$time\" {} {}('{}') ALLOW FILTERING"
    assert [r.pk for r in cql.execute(log.format(">", "minTimeuuid", at))] == [2]
    assert [r.pk for r in cql.execute(log.format("<", "maxTimeuuid", at))] == [1]
    row = cql.execute(
        "SELECT minTimeuuid(0), maxTimeuuid(0), blobAsText(textAsBlob(v)) FROM ks.win WHERE pk = 1"
    ).one()
    assert str(row[0]) == "13814000-1dd2-11b2-8080-808080808080"  # Cassandra's documented values
    assert str(row[1]) == "1381670f-1dd2-11b2-7f7f-7f7f7f7f7f7f"
    assert row[2] == "a"
    assert cql.execute("SELECT uuid() FROM ks.win WHERE pk = 1").one()[0].version == 4
    stamps = [r[0] for r in cql.execute('SELECT dateOf("cdc$time") FROM ks.win_scylla_cdc_log')]
    assert all(abs(s.replace(tzinfo=dt.UTC) - between) < dt.timedelta(seconds=5) for s in stamps)


def test_insert_if_not_exists_returns_the_row_that_is_there(cql: Session) -> None:
    cql.execute("DROP TABLE IF EXISTS ks.lwt")
    cql.execute("CREATE TABLE ks.lwt (pk int, ck int, v text, PRIMARY KEY (pk, ck))")
    first = cql.execute("INSERT INTO ks.lwt (pk, ck, v) VALUES (1, 1, 'a') IF NOT EXISTS")
    assert first.was_applied and first.column_names == ["[applied]"]
    again = cql.execute("INSERT INTO ks.lwt (pk, ck, v) VALUES (1, 1, 'b') IF NOT EXISTS")
    assert not again.was_applied
    assert again.column_names == ["[applied]", "pk", "ck", "v"]
    assert tuple(again.current_rows[0]) == (False, 1, 1, "a")


def test_paging_over_the_log(server: RunningServer, cql: Session) -> None:
    _paging(server, cql, PAGING_ROWS)


@pytest.mark.soak
def test_paging_over_100000_log_rows(server: RunningServer, cql: Session) -> None:
    _paging(server, cql, 100_000)


def _paging(server: RunningServer, cql: Session, n: int) -> None:
    cql.execute("DROP TABLE IF EXISTS ks.big")
    cql.execute(
        "CREATE TABLE ks.big (pk int, ck int, v text, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    conn = changefeed.connect(server.db, dialect="cql")
    try:
        conn.executemany(
            "INSERT INTO ks.big (pk, ck, v) VALUES (?, ?, ?)", [(i % 97, i, f"v{i}") for i in range(n)]
        )
        expected = conn.execute('SELECT "cdc$stream_id", "cdc$time", ck FROM ks.big_scylla_cdc_log').rows
    finally:
        conn.close()
    stmt = SimpleStatement(
        'SELECT "cdc$stream_id", "cdc$time", ck FROM ks.big_scylla_cdc_log', fetch_size=1000
    )
    got = [tuple(r) for r in cql.execute(stmt)]
    assert len(got) == n
    assert got == expected
    # a prepared, windowed read as ScyllaDB's CDC libraries send it
    streams = sorted({r[0] for r in expected})[:3]
    times = sorted((r[1] for r in expected), key=timeuuid_key)  # as ScyllaDB orders timeuuids
    lo, hi = times[0], times[-1]
    q = cql.prepare(
        'SELECT * FROM ks.big_scylla_cdc_log WHERE "cdc$stream_id" IN (?, ?, ?) AND "cdc$time" >= ? AND "cdc$time" <= ? BYPASS CACHE'
    )
    q.fetch_size = 500
    windowed = [(r.cdc_stream_id, r.cdc_time, r.ck) for r in cql.execute(q, [*streams, lo, hi])]
    assert windowed == [r for r in expected if r[0] in streams]


def test_use_and_schema_events(server: RunningServer) -> None:
    c1, c2 = cluster(server), cluster(server)
    try:
        s1, s2 = c1.connect(), c2.connect()
        s1.execute(
            "CREATE KEYSPACE IF NOT EXISTS ev WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        s1.set_keyspace("ev")
        s1.execute("CREATE TABLE e (k int PRIMARY KEY, v int)")
        s1.execute("INSERT INTO e (k, v) VALUES (1, 2)")
        assert s1.execute("SELECT v FROM e WHERE k = 1").one().v == 2
        deadline = time.time() + 10
        while "e" not in c2.metadata.keyspaces.get("ev", type("k", (), {"tables": {}})).tables:
            assert time.time() < deadline, "the other client's metadata never saw the new table"
            time.sleep(0.1)
        with pytest.raises(InvalidRequest, match="does not exist"):
            s2.execute("USE nosuchkeyspace")
        # a table made elsewhere (another process, `changefeed sql`) and its CDC log reach the
        # drivers through the events the endpoint sends when it sees the catalog change
        other = changefeed.connect(server.db, dialect="cql")
        try:
            other.execute(
                "CREATE TABLE ev.made_elsewhere (k int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
            )
        finally:
            other.close()
        deadline = time.time() + 15
        while not {"made_elsewhere", "made_elsewhere_scylla_cdc_log"} <= set(
            c2.metadata.keyspaces["ev"].tables
        ):
            assert time.time() < deadline, "the schema-change events never arrived"
            time.sleep(0.1)
    finally:
        c1.shutdown()
        c2.shutdown()


def test_a_cdc_table_sends_its_logs_event_before_the_answer(server: RunningServer, cql: Session) -> None:
    """As ScyllaDB's notifier: CREATE TABLE .. WITH cdc sends CREATED events for the table and its
    log to registered connections before its answer, and the answer waits until they re-read the
    log's schema; CREATE TABLE IF NOT EXISTS of an existing table still sends the table's event."""

    def strings(body: bytes) -> list[str]:
        out, at = [], 0
        while at < len(body):
            (n,) = struct.unpack(">H", body[at : at + 2])
            out.append(body[at + 2 : at + 2 + n].decode())
            at += 2 + n
        return out

    def events(sock: socket.socket, until: str) -> list[tuple[str, ...]]:
        got: list[tuple[str, ...]] = []
        while not got or got[-1][-1] != until:
            opcode, _, body = _read_frame(sock)
            if opcode == 0x0C:
                got.append(tuple(strings(body)[1:]))
        return got

    cql.execute("DROP TABLE IF EXISTS ks.evt")
    with socket.create_connection((server.host, server.port)) as sock:
        sock.settimeout(30)
        _startup(sock)
        sock.sendall(_frame(4, 2, 0x0B, struct.pack(">H", 1) + struct.pack(">H", 13) + b"SCHEMA_CHANGE"))
        assert _read_frame(sock)[0] == 0x02  # READY
        ddl = cql.execute_async(
            "CREATE TABLE ks.evt (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
        )
        answered = threading.Event()
        ddl.add_callbacks(lambda _: answered.set(), lambda _: answered.set())
        got = events(sock, "evt_scylla_cdc_log")
        assert ("CREATED", "TABLE", "ks", "evt") in got and got[-1] == (
            "CREATED",
            "TABLE",
            "ks",
            "evt_scylla_cdc_log",
        )
        time.sleep(0.3)
        assert not answered.is_set()  # waiting for this connection to re-read the log's schema
        query = b"SELECT * FROM system_schema.views WHERE keyspace_name = 'ks' AND view_name = 'evt_scylla_cdc_log'"
        sock.sendall(_frame(4, 3, 0x07, struct.pack(">i", len(query)) + query + struct.pack(">HB", 1, 0)))
        ddl.result()
        cql.execute(
            "CREATE TABLE IF NOT EXISTS ks.evt (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
        )
        assert events(sock, "evt")[-1] == ("CREATED", "TABLE", "ks", "evt")


def test_errors_have_cql_codes(cql: Session) -> None:
    with pytest.raises(SyntaxException):
        cql.execute("SELEC * FROM ks.t")
    with pytest.raises(InvalidRequest, match="does not exist"):
        cql.execute("SELECT * FROM ks.nosuchtable")
    from cassandra import AlreadyExists

    drop_t(cql)
    cql.execute("CREATE TABLE ks.t (pk int PRIMARY KEY)")
    with pytest.raises(AlreadyExists):
        cql.execute("CREATE TABLE ks.t (pk int PRIMARY KEY)")
    with pytest.raises(InvalidRequest):
        cql.execute("INSERT INTO ks.t (pk) VALUES ('text')")


def test_delete_from_the_cdc_log(cql: Session, server: RunningServer) -> None:
    """Issue 21 item 9: ScyllaDB lets users delete from a CDC log, by stream (its partition key)."""
    drop_t(cql)
    cql.execute(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    for i in range(6):
        cql.execute(f"INSERT INTO ks.t (pk, ck, v) VALUES ({i}, 0, {i})")
    rows = list(cql.execute('SELECT "cdc$stream_id", "cdc$time", pk FROM ks.t_scylla_cdc_log'))
    victim = rows[0]
    with pytest.raises(InvalidRequest, match="partition key"):
        cql.execute("DELETE FROM ks.t_scylla_cdc_log WHERE pk = 1")
    cql.execute(
        'DELETE FROM ks.t_scylla_cdc_log WHERE "cdc$stream_id" = %s AND "cdc$time" = %s',
        (victim.cdc_stream_id, victim.cdc_time),
    )
    left = list(cql.execute("SELECT pk FROM ks.t_scylla_cdc_log"))
    assert sorted(r.pk for r in left) == sorted(r.pk for r in rows[1:])
    conn = changefeed.connect(server.db, dialect="cql")
    try:
        stream = rows[1].cdc_stream_id
        conn.execute('DELETE FROM ks.t_scylla_cdc_log WHERE "cdc$stream_id" = ?', (stream,))
        assert not any(
            r[0] == stream for r in conn.execute('SELECT "cdc$stream_id" FROM ks.t_scylla_cdc_log').rows
        )
    finally:
        conn.close()


# ---------------------------------------------------------------------- authentication and privileges
def test_passwords_and_privileges(server: RunningServer) -> None:
    admin = changefeed.connect(server.db)
    try:
        admin.execute("CREATE USER alice WITH PASSWORD 'secret'")
        admin.execute("CREATE USER bob")
    finally:
        admin.close()
    root = cluster(server, auth_provider=PlainTextAuthProvider("root", "anything"))
    s = root.connect()  # root has no password: let in by name from loopback
    s.execute("CREATE TABLE IF NOT EXISTS ks.priv (k int PRIMARY KEY, v int)")
    s.execute("INSERT INTO ks.priv (k, v) VALUES (1, 1)")
    with pytest.raises(NoHostAvailable) as info:
        cluster(server, auth_provider=PlainTextAuthProvider("alice", "wrong")).connect()
    assert any(isinstance(e, AuthenticationFailed) for e in info.value.errors.values())
    assert "incorrect" in str(info.value)
    with pytest.raises(NoHostAvailable):  # once a user has a password, credentials are required
        cluster(server).connect()
    alice = cluster(server, auth_provider=PlainTextAuthProvider("alice", "secret"))
    a = alice.connect()
    with pytest.raises(Unauthorized):
        a.execute("SELECT * FROM ks.priv")
    s.execute("SELECT * FROM ks.priv")
    admin = changefeed.connect(server.db)
    try:
        admin.execute("GRANT SELECT ON TABLE ks.priv TO alice")
    finally:
        admin.close()
    assert a.execute("SELECT v FROM ks.priv WHERE k = 1").one().v == 1
    with pytest.raises(Unauthorized):
        a.execute("INSERT INTO ks.priv (k, v) VALUES (2, 2)")
    alice.shutdown()
    root.shutdown()
    admin = changefeed.connect(server.db)
    try:
        admin.execute("DROP USER alice")
    finally:
        admin.close()


# ---------------------------------------------------------------------- misbehaving clients
def _frame(version: int, stream: int, opcode: int, body: bytes) -> bytes:
    return struct.pack(">BBhBi", version, 0, stream, opcode, len(body)) + body


def _read_frame(sock: socket.socket) -> tuple[int, int, bytes]:
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    _, _, _, opcode, length = struct.unpack(">BBhBi", head)
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            raise ConnectionError("closed")
        body += chunk
    return opcode, length, body


def _startup(sock: socket.socket) -> None:
    body = struct.pack(">H", 1) + struct.pack(">H", 11) + b"CQL_VERSION" + struct.pack(">H", 5) + b"3.0.0"
    sock.sendall(_frame(4, 1, 0x01, body))
    opcode, _, _ = _read_frame(sock)
    assert opcode == 0x02  # READY


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionError, TimeoutError):
        return isinstance(sock, socket.socket)
    return True


def test_malformed_frames_get_a_protocol_error_and_others_are_unaffected(
    server: RunningServer, cql: Session
) -> None:
    with socket.create_connection((server.host, server.port)) as sock:
        _startup(sock)
        sock.sendall(_frame(4, 2, 0x07, b"\x00\x00\x00\xffSELECT"))  # a [long string] longer than the body
        opcode, _, body = _read_frame(sock)
        assert opcode == 0x00 and struct.unpack(">i", body[:4])[0] == 0x000A
        assert _closed(sock)
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
        opcode, _, body = _read_frame(sock)
        assert opcode == 0x00 and struct.unpack(">i", body[:4])[0] == 0x000A
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(_frame(5, 0, 0x05, b""))  # protocol v5: refused as ScyllaDB refuses it
        opcode, _, body = _read_frame(sock)
        assert opcode == 0x00 and b"Invalid or unsupported protocol version (5)" in body
    assert cql.execute("SELECT key FROM system.local").one().key == "local"


def test_a_client_that_stops_reading_is_closed(
    server: RunningServer, cql: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cql_session, "WRITE_TIMEOUT", 1.0)
    cql.execute("CREATE TABLE IF NOT EXISTS ks.wide (k int PRIMARY KEY, v text)")
    cql.execute("INSERT INTO ks.wide (k, v) VALUES (1, %s)", ("x" * 400_000,))
    query = b"SELECT * FROM ks.wide"
    body = struct.pack(">i", len(query)) + query + struct.pack(">HB", 1, 0)
    requests = 200  # 80 MB of answers: far more than the sockets' buffers
    with socket.create_connection((server.host, server.port)) as sock:
        _startup(sock)
        for i in range(requests):
            try:
                sock.sendall(_frame(4, i, 0x07, body))
            except (BrokenPipeError, ConnectionResetError):
                break
        time.sleep(2.5)
        assert cql.execute("SELECT key FROM system.local").one().key == "local"  # others unaffected
        sock.settimeout(10)  # what was written before the close, then the end of the stream
        received = 0
        with contextlib.suppress(ConnectionResetError):  # a close with our requests unread: a reset
            while chunk := sock.recv(1 << 20):
                received += len(chunk)
        assert received < requests * 400_000 // 2  # closed long before all answers were written


# ---------------------------------------------------------------------- TLS
def test_tls_with_certs_dir(tmp_path: Path) -> None:
    """With node.crt/node.key in --certs-dir the whole port speaks TLS; the driver verifies it."""
    import ssl

    from tests.sink_servers import make_ca

    ca = make_ca()
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "node.crt").write_bytes(ca.cert_pem)
    (certs / "node.key").write_bytes(ca.key_pem)
    (certs / "ca.crt").write_bytes(ca.ca_pem)
    srv = start_server(tmp_path / "db", certs_dir=certs)
    try:
        ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        c = cluster(srv, ssl_context=ctx)
        try:
            assert (
                c.connect().execute("SELECT cluster_name FROM system.local").one().cluster_name
                == "changefeed"
            )
        finally:
            c.shutdown()
        with socket.create_connection((srv.host, srv.port)) as sock:  # plain CQL on a TLS port
            sock.sendall(_frame(4, 0, 0x05, b""))
            sock.settimeout(5)
            assert sock.recv(100)[:1] != b"\x84"  # no CQL answer: a TLS alert or a close
    finally:
        srv.stop()


def test_stopping_the_server_mid_query_waits_for_the_query(tmp_path: Path) -> None:
    """A session cancelled while its SELECT runs on the worker pool (the server stopping) closes
    its connection only once that SELECT is done: closing SQLite under a running statement
    crashed the process (a segfault in CI)."""
    db = tmp_path / "db"
    conn = changefeed.connect(db, dialect="cql")
    conn.execute("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
    conn.execute("CREATE TABLE ks.big (k int PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
    for start in range(0, 40_000, 10_000):
        conn.execute(
            "BEGIN BATCH "
            + " ".join(
                f"INSERT INTO ks.big (k, v) VALUES ({i}, 'v{i}');" for i in range(start, start + 10_000)
            )
            + " APPLY BATCH"
        )
    conn.close()
    query = b"SELECT * FROM ks.big_scylla_cdc_log"
    body = struct.pack(">i", len(query)) + query + struct.pack(">HB", 1, 0)
    for delay in (0.0, 0.05, 0.2):
        srv = start_server(db)
        with socket.create_connection((srv.host, srv.port)) as sock:
            _startup(sock)
            sock.sendall(_frame(4, 1, 0x07, body))
            time.sleep(delay)
            srv.stop()
    srv = start_server(db)
    try:
        c = cluster(srv)
        try:
            assert c.connect().execute("SELECT count(*) FROM ks.big").one()[0] == 40_000
        finally:
            c.shutdown()
    finally:
        srv.stop()


def test_connections_requests_and_errors_reach_the_node_metrics(tmp_path: Path) -> None:
    """The endpoint's own counters, as a node's /metrics shows them (endpoint="cql")."""
    from changefeed.observe import Metrics

    metrics = Metrics()
    srv = start_server(tmp_path / "db", metrics=metrics)
    try:
        c = cluster(srv)
        try:
            s = c.connect()
            s.execute("SELECT key FROM system.local")
            with pytest.raises(InvalidRequest):
                s.execute("SELECT * FROM nope.nothing")
            figures = metrics.endpoints["cql"]
            assert figures.connections >= 1 and figures.connections_total >= 1
            assert figures.requests >= 2 and figures.errors >= 1
        finally:
            c.shutdown()
        deadline = time.monotonic() + 10
        while metrics.endpoints["cql"].connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert metrics.endpoints["cql"].connections == 0
    finally:
        srv.stop()
