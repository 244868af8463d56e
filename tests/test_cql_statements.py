"""CQL statements beyond the basics, through ScyllaDB's Python driver and cqlsh, answered as
ScyllaDB 5.x/6.x answers them: TRUNCATE (not in the CDC log), GROUP BY, PER PARTITION LIMIT,
SELECT JSON and INSERT JSON, aggregates' types, integer literals for timestamps, consistency
levels a read may not use, and one clear error for statements this endpoint does not build."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal

import pytest
from cassandra import ConsistencyLevel, InvalidRequest
from cassandra.cluster import Cluster, Session
from cassandra.protocol import SyntaxException
from cassandra.query import SimpleStatement

from tests.cql_server import RunningServer, run_cqlsh, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    srv = start_server(tmp_path_factory.mktemp("cqlstmts") / "db")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def cql(server: RunningServer) -> Iterator[Session]:
    c = Cluster([server.host], port=server.port)
    s = c.connect()
    yield s
    c.shutdown()


def _numbers(cql: Session, name: str) -> None:
    cql.execute(f"DROP TABLE IF EXISTS ks.{name}")
    cql.execute(
        f"CREATE TABLE ks.{name} (pk int, ck int, v int, b bigint, ti tinyint, si smallint, vi varint, "
        "d double, f float, dec decimal, ts timestamp, PRIMARY KEY (pk, ck))"
    )
    ins = cql.prepare(
        f"INSERT INTO ks.{name} (pk, ck, v, b, ti, si, vi, d, f, dec) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    for pk in range(3):
        for ck in range(3):
            n = pk * 3 + ck
            cql.execute(ins, (pk, ck, n, n, ck, ck, n, ck + 0.5, ck + 0.5, Decimal(ck) + Decimal("0.5")))


# ---------------------------------------------------------------------- TRUNCATE
def test_truncate_empties_the_table_and_leaves_its_cdc_log_alone(cql: Session) -> None:
    """ScyllaDB: a truncation is no mutation, so the CDC log has no entry of it and keeps the
    entries it had; ``TRUNCATE`` of the log empties the log."""
    cql.execute("DROP TABLE IF EXISTS ks.tr")
    cql.execute(
        "CREATE TABLE ks.tr (pk int, ck int, v int, s int static, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    for pk in range(3):
        cql.execute("INSERT INTO ks.tr (pk, ck, v, s) VALUES (%s, 1, 1, 7)", (pk,))
    logged = cql.execute("SELECT count(*) FROM ks.tr_scylla_cdc_log").one()[0]
    assert logged > 0
    cql.execute("TRUNCATE ks.tr")
    assert list(cql.execute("SELECT * FROM ks.tr")) == []
    assert cql.execute("SELECT count(*) FROM ks.tr_scylla_cdc_log").one()[0] == logged
    cql.execute("INSERT INTO ks.tr (pk, ck, v) VALUES (1, 2, 3)")  # the table goes on as before
    assert [tuple(r) for r in cql.execute("SELECT pk, ck, v, s FROM ks.tr")] == [(1, 2, 3, None)]
    cql.execute("TRUNCATE TABLE ks.tr_scylla_cdc_log")
    assert cql.execute("SELECT count(*) FROM ks.tr_scylla_cdc_log").one()[0] == 0
    cql.execute("TRUNCATE COLUMNFAMILY ks.tr")
    assert list(cql.execute("SELECT * FROM ks.tr")) == []
    with pytest.raises(InvalidRequest, match="does not exist"):
        cql.execute("TRUNCATE ks.no_such_table")


# ---------------------------------------------------------------------- GROUP BY, PER PARTITION LIMIT
def test_group_by_a_primary_key_prefix(cql: Session) -> None:
    _numbers(cql, "g")
    rows = sorted(tuple(r) for r in cql.execute("SELECT pk, count(*), max(v), sum(v) FROM ks.g GROUP BY pk"))
    assert rows == [(0, 3, 2, 3), (1, 3, 5, 12), (2, 3, 8, 21)]
    # a column neither grouped nor aggregated: its group's first row (ScyllaDB's first())
    rows = sorted(tuple(r) for r in cql.execute("SELECT pk, v, count(*) FROM ks.g GROUP BY pk"))
    assert rows == [(0, 0, 3), (1, 3, 3), (2, 6, 3)]
    rows = [tuple(r) for r in cql.execute("SELECT pk, ck, count(*) FROM ks.g WHERE pk = 1 GROUP BY ck")]
    assert rows == [(1, 0, 1), (1, 1, 1), (1, 2, 1)]
    assert len(list(cql.execute("SELECT pk, ck FROM ks.g GROUP BY pk, ck LIMIT 4"))) == 4
    errors = {
        "SELECT v FROM ks.g GROUP BY ck": "Group by column ck is out of order",
        "SELECT v FROM ks.g GROUP BY v": "Group by non-primary-key column v",
        "SELECT v FROM ks.g GROUP BY pk, v": "Group by non-primary-key column v",
        "SELECT v FROM ks.g GROUP BY ck, pk": "Group by column ck is out of order",
    }
    for stmt, message in errors.items():
        with pytest.raises(InvalidRequest, match=message):
            cql.execute(stmt)


def test_per_partition_limit(cql: Session) -> None:
    _numbers(cql, "ppl")
    rows = sorted(tuple(r) for r in cql.execute("SELECT pk, ck FROM ks.ppl PER PARTITION LIMIT 2"))
    assert rows == [(pk, ck) for pk in range(3) for ck in range(2)]
    assert len(list(cql.execute("SELECT pk, ck FROM ks.ppl PER PARTITION LIMIT 2 LIMIT 3"))) == 3
    rows = [
        tuple(r)
        for r in cql.execute("SELECT pk, ck FROM ks.ppl WHERE pk = 1 ORDER BY ck DESC PER PARTITION LIMIT 1")
    ]
    assert rows == [(1, 2)]
    rows = sorted(
        tuple(r)
        for r in cql.execute("SELECT pk, ck FROM ks.ppl WHERE v > 4 PER PARTITION LIMIT 1 ALLOW FILTERING")
    )
    assert rows == [(1, 2), (2, 0)]  # the limit counts the rows the filter keeps
    bound = cql.prepare("SELECT pk, ck FROM ks.ppl PER PARTITION LIMIT ? LIMIT ?")
    assert len(list(cql.execute(bound, (1, 100)))) == 3
    errors = {
        "SELECT pk FROM ks.ppl PER PARTITION LIMIT 0": "PER PARTITION LIMIT must be strictly positive",
        "SELECT count(*) FROM ks.ppl PER PARTITION LIMIT 1": "PER PARTITION LIMIT is not allowed with aggregate queries",
        "SELECT DISTINCT pk FROM ks.ppl PER PARTITION LIMIT 1": "PER PARTITION LIMIT is not allowed with SELECT DISTINCT",
    }
    for stmt, message in errors.items():
        with pytest.raises(InvalidRequest, match=message):
            cql.execute(stmt)


# ---------------------------------------------------------------------- JSON
def test_select_json_and_insert_json(cql: Session) -> None:
    cql.execute("DROP TABLE IF EXISTS ks.j")
    cql.execute(
        "CREATE TABLE ks.j (pk int, ck int, v int, t text, ts timestamp, d double, dec decimal, b blob, "
        'u uuid, ok boolean, day date, "Big" int, PRIMARY KEY (pk, ck))'
    )
    doc = {
        "pk": 1,
        "ck": 2,
        "v": "5",  # a string in the CQL literal's form is taken for every type
        "t": 'say "hi"',
        "ts": 1704164645678,  # milliseconds since the epoch
        "d": 2.5,
        "dec": 1.25,
        "b": "0x0102",
        "u": "123e4567-e89b-12d3-a456-426614174000",
        "ok": True,
        "day": "2024-01-02",
        '"Big"': 7,
    }
    cql.execute("INSERT INTO ks.j JSON %s", (json.dumps(doc),))
    rs = cql.execute("SELECT JSON * FROM ks.j WHERE pk = 1")
    assert rs.column_names == ["[json]"]
    got = json.loads(rs.one()[0])
    assert got == {
        "pk": 1,
        "ck": 2,
        '"Big"': 7,
        "b": "0x0102",
        "d": 2.5,
        "day": "2024-01-02",
        "dec": 1.25,
        "ok": True,
        "t": 'say "hi"',
        "ts": "2024-01-02 03:04:05.678Z",
        "u": "123e4567-e89b-12d3-a456-426614174000",
        "v": 5,
    }
    row = cql.execute('SELECT v, ts, b, "Big" FROM ks.j WHERE pk = 1').one()
    assert tuple(row) == (5, dt.datetime(2024, 1, 2, 3, 4, 5, 678000), b"\x01\x02", 7)
    # DEFAULT UNSET leaves the other columns alone; DEFAULT NULL (the default) writes them null
    cql.execute("""INSERT INTO ks.j JSON '{"pk": 1, "ck": 2, "v": 6}' DEFAULT UNSET""")
    assert tuple(cql.execute("SELECT v, t FROM ks.j WHERE pk = 1").one()) == (6, 'say "hi"')
    cql.execute("""INSERT INTO ks.j JSON '{"pk": 1, "ck": 2, "v": 7}' DEFAULT NULL""")
    assert tuple(cql.execute("SELECT v, t FROM ks.j WHERE pk = 1").one()) == (7, None)
    assert cql.execute("SELECT JSON v, t FROM ks.j WHERE pk = 1").one()[0] == '{"v": 7, "t": null}'
    prepared = cql.prepare("INSERT INTO ks.j JSON ? DEFAULT UNSET")
    assert [c.name for c in prepared.column_metadata] == ["[json]"]
    cql.execute(prepared, ('{"pk": 2, "ck": 0, "t": "x"}',))
    assert cql.execute("SELECT t FROM ks.j WHERE pk = 2").one()[0] == "x"
    errors = {
        """INSERT INTO ks.j JSON '{"pk": 1, "ck": 2, "nope": 1}'""": "JSON values map contains unrecognized column: nope",
        """INSERT INTO ks.j JSON '[1, 2]'""": "Could not decode JSON string as a map",
        """INSERT INTO ks.j JSON '{"pk": 1, "ck": "x"}'""": 'Invalid STRING constant \\(x\\) for "ck" of type int',
        """INSERT INTO ks.j JSON '{"pk": 1, "ck": 1, "b": "01"}'""": "Blob JSON strings must start with 0x",
    }
    for stmt, message in errors.items():
        with pytest.raises(InvalidRequest, match=message):
            cql.execute(stmt)


# ---------------------------------------------------------------------- aggregates
def test_sum_and_avg_have_their_arguments_type(cql: Session) -> None:
    """ScyllaDB: ``sum`` and ``avg`` of a type are of that type; an integer average is truncated,
    a decimal one keeps the sum's scale (rounded half to even); of no rows they are 0."""
    _numbers(cql, "agg")
    cols = ["v", "b", "ti", "si", "vi", "d", "f", "dec"]
    rs = cql.execute("SELECT " + ", ".join(f"avg({c}), sum({c})" for c in cols) + " FROM ks.agg")
    types = [t.typename for t in rs.column_types]
    assert types == [
        t
        for t in ("int", "bigint", "tinyint", "smallint", "varint", "double", "float", "decimal")
        for _ in (0, 1)
    ]
    assert list(rs.one()) == [
        4,
        36,
        4,
        36,
        1,
        9,
        1,
        9,
        4,
        36,
        1.5,
        13.5,
        1.5,
        13.5,
        Decimal("1.5"),
        Decimal("13.5"),
    ]
    assert list(cql.execute("SELECT avg(v), sum(v), avg(dec) FROM ks.agg WHERE pk = 99").one()) == [
        0,
        0,
        Decimal(0),
    ]
    cql.execute("INSERT INTO ks.agg (pk, ck, v) VALUES (9, 0, -7)")
    cql.execute("INSERT INTO ks.agg (pk, ck, v) VALUES (9, 1, 0)")
    assert cql.execute("SELECT avg(v) FROM ks.agg WHERE pk = 9").one()[0] == -3  # toward zero
    cql.execute("INSERT INTO ks.agg (pk, ck, ti) VALUES (9, 2, 127)")
    with pytest.raises(InvalidRequest, match=r"Sum overflow\. Values should be casted to a wider type\."):
        cql.execute("SELECT sum(ti) FROM ks.agg")
    with pytest.raises(
        InvalidRequest, match="Invalid call to function avg, none of its type signatures match"
    ):
        cql.execute("SELECT avg(ts) FROM ks.agg")


# ---------------------------------------------------------------------- literals typed by their column
def test_integer_literals_are_timestamps(cql: Session) -> None:
    cql.execute("DROP TABLE IF EXISTS ks.tsl")
    cql.execute("CREATE TABLE ks.tsl (pk int, ck int, ts timestamp, v text, PRIMARY KEY (pk, ck))")
    cql.execute("INSERT INTO ks.tsl (pk, ck, ts) VALUES (1, 1, 1704164645678)")
    cql.execute("INSERT INTO ks.tsl (pk, ck, ts) VALUES (1, 2, 1704164645679)")
    cql.execute("UPDATE ks.tsl SET ts = 1704164645680 WHERE pk = 1 AND ck = 3")
    rows = [r.ck for r in cql.execute("SELECT ck FROM ks.tsl WHERE ts = 1704164645678 ALLOW FILTERING")]
    assert rows == [1]
    rows = [r.ck for r in cql.execute("SELECT ck FROM ks.tsl WHERE ts > 1704164645678 ALLOW FILTERING")]
    assert rows == [2, 3]
    rows = [r.ck for r in cql.execute("SELECT ck FROM ks.tsl WHERE ts IN (1704164645679, 1) ALLOW FILTERING")]
    assert rows == [2]
    assert cql.execute("SELECT ts FROM ks.tsl WHERE pk = 1 AND ck = 1").one()[0] == dt.datetime(
        2024, 1, 2, 3, 4, 5, 678000
    )
    # a literal its column's type cannot read: ScyllaDB's words, no PostgreSQL type names
    with pytest.raises(InvalidRequest, match='Invalid STRING constant \\(abc\\) for "ts" of type timestamp'):
        cql.execute("SELECT ck FROM ks.tsl WHERE ts = 'abc' ALLOW FILTERING")
    with pytest.raises(InvalidRequest, match='Invalid INTEGER constant \\(1\\) for "v" of type text'):
        cql.execute("SELECT ck FROM ks.tsl WHERE v = 1 ALLOW FILTERING")
    with pytest.raises(InvalidRequest) as err:
        cql.execute("SELECT ck FROM ks.tsl WHERE ts = ck ALLOW FILTERING")
    assert "timestamptz" not in str(err.value)


# ---------------------------------------------------------------------- consistency levels
def test_reads_refuse_write_only_consistency_levels(cql: Session) -> None:
    cql.execute("CREATE TABLE IF NOT EXISTS ks.cl (pk int PRIMARY KEY, v int)")
    for level, name in ((ConsistencyLevel.ANY, "ANY"), (ConsistencyLevel.EACH_QUORUM, "EACH_QUORUM")):
        with pytest.raises(InvalidRequest, match=f"{name} ConsistencyLevel is only supported for writes"):
            cql.execute(SimpleStatement("SELECT * FROM ks.cl", consistency_level=level))
        cql.execute(SimpleStatement("INSERT INTO ks.cl (pk, v) VALUES (1, 1)", consistency_level=level))
    with pytest.raises(InvalidRequest, match="You must use conditional updates for serializable writes"):
        cql.execute(
            SimpleStatement(
                "INSERT INTO ks.cl (pk, v) VALUES (1, 1)", consistency_level=ConsistencyLevel.SERIAL
            )
        )
    assert (
        cql.execute(SimpleStatement("SELECT v FROM ks.cl", consistency_level=ConsistencyLevel.ONE)).one()[0]
        == 1
    )


# ---------------------------------------------------------------------- statements not built
@pytest.mark.parametrize(
    ("stmt", "name"),
    [
        ("CREATE INDEX ON ks.t (v)", "CREATE INDEX"),
        ("CREATE CUSTOM INDEX i ON ks.t (v) USING 'x'", "CREATE INDEX"),
        ("DROP INDEX ks.i", "DROP INDEX"),
        (
            "CREATE MATERIALIZED VIEW ks.mv AS SELECT * FROM ks.t WHERE v IS NOT NULL PRIMARY KEY (v, pk)",
            "CREATE MATERIALIZED VIEW",
        ),
        ("drop materialized view ks.mv", "DROP MATERIALIZED VIEW"),
        ("CREATE TYPE ks.address (street text)", "CREATE TYPE"),
        (
            "CREATE OR REPLACE FUNCTION ks.f (a int) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE lua AS 'return a'",
            "CREATE FUNCTION",
        ),
        ("CREATE ROLE alice WITH PASSWORD = 'x' AND LOGIN = true", "CREATE ROLE"),
        ("/* a comment */ CREATE USER bob WITH PASSWORD 'x'", "CREATE USER"),
        ("GRANT SELECT ON ks.t TO alice", "GRANT"),
        ("LIST ROLES", "LIST ROLES"),
        ("ALTER KEYSPACE ks WITH durable_writes = false", "ALTER KEYSPACE"),
    ],
)
def test_statements_not_built_are_one_invalid_error(cql: Session, stmt: str, name: str) -> None:
    with pytest.raises(InvalidRequest, match=f'^.*{name} is not supported by this endpoint"?$') as err:
        cql.execute(stmt)
    assert "expected one of" not in str(err.value)
    assert "code=2200" in str(err.value)


def test_a_statement_that_is_no_statement_is_still_a_syntax_error(cql: Session) -> None:
    with pytest.raises(SyntaxException, match="unexpected 'TABLEX'"):
        cql.execute("CREATE TABLEX ks.t (pk int PRIMARY KEY)")


# ---------------------------------------------------------------------- cqlsh
def test_cqlsh_runs_the_new_statements(server: RunningServer, cql: Session) -> None:
    cql.execute("DROP TABLE IF EXISTS ks.sh")
    cql.execute("CREATE TABLE ks.sh (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    script = (
        'INSERT INTO ks.sh JSON \'{"pk": 1, "ck": 1, "v": 10}\';\n'
        "INSERT INTO ks.sh (pk, ck, v) VALUES (1, 2, 20);\n"
        "INSERT INTO ks.sh (pk, ck, v) VALUES (2, 1, 30);\n"
        "SELECT JSON pk, ck, v FROM ks.sh WHERE pk = 1 AND ck = 1;\n"
        "SELECT pk, avg(v) FROM ks.sh WHERE pk = 1 GROUP BY pk;\n"
        "SELECT pk, ck FROM ks.sh WHERE pk IN (1, 2) PER PARTITION LIMIT 1;\n"
        "TRUNCATE ks.sh;\n"
        "SELECT count(*) FROM ks.sh;\n"
        "CREATE INDEX ON ks.sh (v);\n"
    )
    out = run_cqlsh(server, script)
    assert out.stdout.strip("\n") == (
        ' [json]\n-----------------------------\n {"pk": 1, "ck": 1, "v": 10}\n\n(1 rows)\n\n'
        " pk | avg\n----+-----\n  1 |  15\n\n(1 rows)\n\n"
        " pk | ck\n----+----\n  1 |  1\n  2 |  1\n\n(2 rows)\n\n"
        " count\n-------\n     0\n\n(1 rows)"
    )
    assert out.stderr.strip() == (
        '<stdin>:10:InvalidRequest: Error from server: code=2200 [Invalid query] message="CREATE INDEX is not '
        'supported by this endpoint"'
    )
