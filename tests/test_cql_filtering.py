"""ScyllaDB's ALLOW FILTERING rule and ``ttl()``, through ScyllaDB's Python driver and cqlsh.

A SELECT whose WHERE would need filtering is refused unless it says ``ALLOW FILTERING``, with
ScyllaDB's messages (``cql3/restrictions/statement_restrictions.cc``); the CDC libraries' window
reads of a CDC log pass without it. ``ttl(v)`` is a cell's remaining TTL in seconds;
``writetime(v)`` is refused (no per-cell write timestamps are kept)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster, Session

from tests.cql_server import RunningServer, run_cqlsh, start_server

FILTERING = (
    "Cannot execute this query as it might involve data filtering and thus may have unpredictable "
    "performance. If you want to execute this query despite the performance unpredictability, use "
    "ALLOW FILTERING"
)
PK_SLICE = "Only EQ and IN relation are supported on the partition key (unless you use the token() function or ALLOW FILTERING)"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    srv = start_server(tmp_path_factory.mktemp("cqlfilter") / "db")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def cql(server: RunningServer) -> Iterator[Session]:
    cluster = Cluster([server.host], port=server.port)
    s = cluster.connect()
    s.execute(
        "CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    s.execute(
        "CREATE TABLE IF NOT EXISTS ks.f (a int, b int, c int, d int, e int, v int, s int static, "
        "PRIMARY KEY ((a, b), c, d, e)) WITH cdc = {'enabled': true}"
    )
    ins = s.prepare("INSERT INTO ks.f (a, b, c, d, e, v) VALUES (?, ?, ?, ?, ?, ?)")
    for a in range(2):
        for c in range(3):
            for d in range(2):
                s.execute(ins, (a, 0, c, d, 0, a * 100 + c * 10 + d))
    s.execute("UPDATE ks.f SET s = 7 WHERE a = 1 AND b = 0")
    yield s
    cluster.shutdown()


REFUSED = {
    # a column outside the primary key (regular, static)
    "SELECT * FROM ks.f WHERE v = 1": FILTERING,
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND v = 1": FILTERING,
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND c = 1 AND d = 0 AND e = 0 AND v > 1": FILTERING,
    "SELECT * FROM ks.f WHERE s = 7": FILTERING,
    # a partition key restricted in part, or by a slice
    "SELECT * FROM ks.f WHERE a = 0": FILTERING,
    "SELECT * FROM ks.f WHERE a IN (0, 1)": FILTERING,
    "SELECT * FROM ks.f WHERE a = 0 AND b > 0": PK_SLICE,
    "SELECT * FROM ks.f WHERE a > 0": PK_SLICE,
    # clustering restrictions that skip a column, follow a slice, or have no partition key
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND d = 1": 'PRIMARY KEY column "d" cannot be restricted as preceding column "c" is not restricted',
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND c = 1 AND e = 0": 'PRIMARY KEY column "e" cannot be restricted as preceding column "d" is not restricted',
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND c > 1 AND d = 1": 'Clustering column "d" cannot be restricted (preceding column "c" is restricted by a non-EQ relation)',
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND d = 1 AND c > 1": 'PRIMARY KEY column "d" cannot be restricted (preceding column "c" is restricted by a non-EQ relation)',
    "SELECT * FROM ks.f WHERE c = 1": FILTERING,
    "SELECT * FROM ks.f WHERE d = 1": 'PRIMARY KEY column "d" cannot be restricted as preceding column "c" is not restricted',
    # a CDC log: its partition key is cdc$stream_id, its clustering key cdc$time, cdc$batch_seq_no
    'SELECT * FROM ks.f_scylla_cdc_log WHERE "cdc$time" > minTimeuuid(0)': FILTERING,
    'SELECT * FROM ks.f_scylla_cdc_log WHERE "cdc$batch_seq_no" = 0': 'PRIMARY KEY column "cdc$batch_seq_no" cannot be restricted as preceding column "cdc$time" is not restricted',
    "SELECT * FROM ks.f_scylla_cdc_log WHERE a = 0": FILTERING,
    'SELECT * FROM ks.f_scylla_cdc_log WHERE "cdc$operation" = 2': FILTERING,
}

#: Restrictions ScyllaDB answers without filtering, and how many rows each returns here.
ACCEPTED = {
    "SELECT * FROM ks.f": 12,
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0": 6,
    "SELECT * FROM ks.f WHERE a IN (0, 1) AND b = 0": 12,
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND c = 1": 2,
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND c > 0 AND c <= 2": 4,
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND c = 1 AND d IN (0, 1)": 2,
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND c = 1 AND d > 0": 1,
    "SELECT * FROM ks.f WHERE a = 0 AND b = 0 AND c IN (1, 2) AND d = 1 AND e = 0": 2,
    "SELECT * FROM ks.f WHERE b = 0 AND a = 0 AND d = 1 AND c = 2": 1,  # the order of the WHERE is free
    "SELECT * FROM ks.f WHERE token(a, b) > -9223372036854775808": 12,
    "SELECT * FROM ks.f WHERE token(a, b) > -9223372036854775808 AND c = 1": 4,
}


def test_filtering_is_refused_without_allow_filtering(cql: Session) -> None:
    for stmt, message in REFUSED.items():
        with pytest.raises(InvalidRequest) as err:
            cql.execute(stmt)
        assert "code=2200" in str(err.value), stmt
        assert f'message="{message}"' in str(err.value), stmt
        # PREPARE refuses it too, as ScyllaDB's prepare does
        with pytest.raises(InvalidRequest) as err:
            cql.prepare(stmt.replace("= 0", "= ?", 1))
        assert f'message="{message}"' in str(err.value), stmt
        cql.execute(stmt + " ALLOW FILTERING")


def test_filtered_reads_with_allow_filtering_are_right(cql: Session) -> None:
    rows = cql.execute("SELECT a, c, d, v FROM ks.f WHERE v > 110 ALLOW FILTERING")
    assert sorted(tuple(r) for r in rows) == [(1, 1, 1, 111), (1, 2, 0, 120), (1, 2, 1, 121)]
    rows = cql.execute("SELECT c, d FROM ks.f WHERE a = 1 AND b = 0 AND d = 1 ALLOW FILTERING")
    assert [tuple(r) for r in rows] == [(0, 1), (1, 1), (2, 1)]
    assert cql.execute("SELECT count(*) FROM ks.f WHERE s = 7 ALLOW FILTERING").one()[0] == 6
    prepared = cql.prepare("SELECT v FROM ks.f WHERE a = ? AND b = ? AND c = ? AND v = ? ALLOW FILTERING")
    assert [r.v for r in cql.execute(prepared, (0, 0, 2, 21))] == [21]


def test_key_restrictions_need_no_allow_filtering(cql: Session) -> None:
    for stmt, n in ACCEPTED.items():
        assert len(list(cql.execute(stmt))) == n, stmt


def test_the_cdc_libraries_window_reads_pass(cql: Session) -> None:
    """What scylla-cdc-go sends (``change.go``): one stream by ``=``, several by ``IN``, a
    ``cdc$time`` window, ``BYPASS CACHE``; and its first-row query with ``PER PARTITION LIMIT``."""
    streams = sorted({r[0] for r in cql.execute('SELECT "cdc$stream_id" FROM ks.f_scylla_cdc_log')})
    assert len(streams) >= 2
    lo, hi = uuid.UUID(int=0), uuid.UUID("ffffffff-ffff-1fff-bfff-ffffffffffff")
    total = 0
    one = cql.prepare(
        'SELECT * FROM ks.f_scylla_cdc_log WHERE "cdc$stream_id" = ? AND "cdc$time" > ? AND "cdc$time" <= ? BYPASS CACHE'
    )
    for stream in streams:
        total += len(list(cql.execute(one, (stream, lo, hi))))
    assert total == cql.execute("SELECT count(*) FROM ks.f_scylla_cdc_log").one()[0]
    marks = ", ".join("?" * len(streams))
    many = cql.prepare(
        f'SELECT * FROM ks.f_scylla_cdc_log WHERE "cdc$stream_id" IN ({marks}) AND "cdc$time" > ? AND "cdc$time" <= ? BYPASS CACHE'
    )
    assert len(list(cql.execute(many, (*streams, lo, hi)))) == total
    first = cql.prepare(
        f'SELECT "cdc$stream_id", "cdc$time" FROM ks.f_scylla_cdc_log WHERE "cdc$stream_id" IN ({marks}) '
        'AND "cdc$time" > ? AND "cdc$time" <= ? PER PARTITION LIMIT 1 BYPASS CACHE'
    )
    assert len(list(cql.execute(first, (*streams, lo, hi)))) == len(streams)
    exact = cql.execute(
        'SELECT * FROM ks.f_scylla_cdc_log WHERE "cdc$stream_id" = %s AND "cdc$time" = %s AND "cdc$batch_seq_no" = 0',
        (streams[0], cql.execute(one, (streams[0], lo, hi)).one()[1]),
    )
    assert len(list(exact)) == 1


# ---------------------------------------------------------------------- ttl(), writetime()
def test_ttl_is_a_cells_remaining_seconds(cql: Session) -> None:
    cql.execute("DROP TABLE IF EXISTS ks.tt")
    cql.execute("CREATE TABLE ks.tt (pk int, ck int, v int, w text, s int static, PRIMARY KEY (pk, ck))")
    cql.execute("INSERT INTO ks.tt (pk, ck, v, w) VALUES (1, 1, 1, 'a') USING TTL 100")
    cql.execute("UPDATE ks.tt USING TTL 50 SET s = 3 WHERE pk = 1")
    cql.execute("INSERT INTO ks.tt (pk, ck, v) VALUES (1, 2, 2)")
    cql.execute("UPDATE ks.tt SET w = 'b' WHERE pk = 1 AND ck = 1")  # rewritten without TTL
    prepared = cql.prepare("SELECT ck, ttl(v), ttl(w), ttl(s) AS left FROM ks.tt WHERE pk = ?")
    rs = cql.execute(prepared, (1,))
    assert rs.column_names == ["ck", "ttl(v)", "ttl(w)", "left"]
    assert [t.typename for t in rs.column_types] == ["int", "int", "int", "int"]
    assert [tuple(r) for r in rs] == [(1, 100, None, 50), (2, None, None, 50)]
    time.sleep(1.1)
    assert tuple(cql.execute("SELECT ttl(v) FROM ks.tt WHERE pk = 1 AND ck = 1").one()) == (99,)
    cql.execute("CREATE TABLE IF NOT EXISTS ks.ttc (pk int PRIMARY KEY, n counter)")
    cql.execute("UPDATE ks.ttc SET n = n + 1 WHERE pk = 1")
    assert tuple(cql.execute("SELECT ttl(n) FROM ks.ttc").one()) == (None,)
    errors = {
        "SELECT ttl(pk) FROM ks.tt": "Cannot use selection function ttl on PRIMARY KEY part pk",
        "SELECT ttl(ck) FROM ks.tt": "Cannot use selection function ttl on PRIMARY KEY part ck",
        "SELECT ttl(nope) FROM ks.tt": "Undefined name nope in selection clause",
        "SELECT writetime(pk) FROM ks.tt": "Cannot use selection function writeTime on PRIMARY KEY part pk",
        "SELECT writetime(v) FROM ks.tt": "writetime() is not supported: the store keeps no per-cell write timestamps",
        "SELECT ttl(v) FROM ks.f_scylla_cdc_log": "ttl() of ks.f_scylla_cdc_log is not supported: only a table's cells keep a TTL here",
    }
    for stmt, message in errors.items():
        with pytest.raises(InvalidRequest) as err:
            cql.execute(stmt)
        assert f'code=2200 [Invalid query] message="{message}"' in str(err.value), stmt


def test_ttl_and_filtering_inrun_cqlsh(server: RunningServer, cql: Session) -> None:
    cql.execute("DROP TABLE IF EXISTS ks.sh")
    cql.execute("CREATE TABLE ks.sh (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    script = (
        "INSERT INTO ks.sh (pk, ck, v) VALUES (1, 1, 10) USING TTL 3600;\n"
        "INSERT INTO ks.sh (pk, ck, v) VALUES (1, 2, 20);\n"
        "SELECT ck, ttl(v) FROM ks.sh WHERE pk = 1;\n"
        "SELECT ck FROM ks.sh WHERE v = 20;\n"
        "SELECT ck FROM ks.sh WHERE v = 20 ALLOW FILTERING;\n"
    )
    out = run_cqlsh(server, script)
    assert out.stdout.strip("\n") == (
        " ck | ttl(v)\n----+--------\n  1 |   3600\n  2 |   null\n\n(2 rows)\n\n ck\n----\n  2\n\n(1 rows)"
    )
    assert (
        out.stderr.strip()
        == f'<stdin>:5:InvalidRequest: Error from server: code=2200 [Invalid query] message="{FILTERING}"'
    )
