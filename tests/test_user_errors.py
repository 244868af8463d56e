"""Issue 21 item 8: no Python internals in error messages. Each error says what the system whose
dialect was used would say, in its words: CockroachDB's ``could not parse "x" as type int``
(22P02) over psycopg and the CLI, YDB's ``Bad atom format`` and ``Invalid retention period`` with
ISO 8601 durations, ScyllaDB's ``Invalid STRING constant``, Phoenix date arithmetic instead of an
error, and ``cdc-poll --from`` in one line. A fuzz of wrong-typed literals into every column type
of every dialect finds no Python text in any message."""

from __future__ import annotations

import datetime as dt
import itertools
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

import changefeed
from changefeed.exceptions import ChangefeedError
from tests.pg_server import RunningServer, start_server

#: Text that only Python (or its libraries) would put in a message.
PYTHON_TEXT = [
    "invalid literal for", "Decimal('", "datetime.", "timedelta(", "b'", "b\"", "isoformat", "<class",
    "Traceback", "could not convert string", "ConversionSyntax", "UUID string", "NoneType", "object has no",
    "unsupported operand", "unsupported operands", "int() ", "float()", "Errno",
]  # fmt: skip


def clean(message: str) -> bool:
    return not any(t in message for t in PYTHON_TEXT) and "\n" not in message


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "changefeed.cli.main", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = tmp_path_factory.mktemp("usererr") / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE d (id INT PRIMARY KEY, v INT, s STRING, day DATE, ok BOOL, u UUID)")
        conn.execute("CREATE TABLE orders (id Uint64, customer Utf8, PRIMARY KEY (id))")
    srv = start_server(db)
    yield srv
    srv.stop()


# --------------------------------------------------------------------------- CockroachDB words
def test_cockroachdb_parse_errors_over_psycopg(server: RunningServer) -> None:
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        cases = [
            ("INSERT INTO d (id, v) VALUES (1, 'x')", "22P02",
             'could not parse "x" as type int: strconv.ParseInt: parsing "x": invalid syntax'),
            ("SELECT 'x'::INT", "22P02", 'could not parse "x" as type int: strconv.ParseInt: parsing "x": invalid syntax'),
            ("INSERT INTO d (id, day) VALUES (1, 'abc')", "22007", 'parsing as type date: could not parse "abc"'),
            ("INSERT INTO d (id, ok) VALUES (1, 'maybe')", "22P02", 'could not parse "maybe" as type bool: invalid bool value'),
            ("INSERT INTO d (id, v) VALUES (1, 1.5)", "42804", 'value type decimal doesn\'t match type int of column "v"'),
            ("INSERT INTO d (id, s) VALUES (1, 5)", "42804", 'value type int doesn\'t match type string of column "s"'),
            ("SELECT 1 + 'a'", "42883", "unsupported binary operator: <int> + <string>"),
            ("SELECT nosuch(1)", "42883", "unknown function: nosuch()"),
        ]  # fmt: skip
        for sql, code, message in cases:
            with pytest.raises(psycopg.Error) as info:
                conn.execute(sql)
            assert (info.value.sqlstate, info.value.diag.message_primary) == (code, message), sql
        with pytest.raises(psycopg.Error) as info:  # a bound parameter that does not parse
            conn.execute("INSERT INTO d (id, v) VALUES (%s, %s)", (1, "x"))
        assert info.value.sqlstate == "22P02" and clean(str(info.value.diag.message_primary))
        assert 'could not parse "x"' in str(info.value.diag.message_primary)
        # date arithmetic as CockroachDB has it
        row = conn.execute("SELECT DATE '2020-03-01' - 1, DATE '2020-03-01' - DATE '2020-01-01'").fetchone()
        assert row == (dt.date(2020, 2, 29), 60)


def test_ydb_words_through_the_cli(server: RunningServer) -> None:
    db = str(server.db)
    out = _cli("sql", "--db", db, "UPSERT INTO orders (id, customer) VALUES ('z', 'a')")
    assert out.returncode == 1 and out.stderr == 'ERROR: Bad atom format for type: Uint64, value: "z"\n'
    out = _cli("sql", "--db", db, "UPSERT INTO orders (id, customer) VALUES (1, 5)")
    assert out.stderr == "ERROR: Failed to convert 'customer': Int32 to Optional<Utf8>\n"
    out = _cli(
        "sql", "--db", db,
        "ALTER TABLE orders ADD CHANGEFEED u WITH (FORMAT = 'JSON', MODE = 'UPDATES', RETENTION_PERIOD = Interval('P31D'))",
    )  # fmt: skip
    assert out.stderr == "ERROR: Invalid retention period: specified: P31D, min: PT1S, max: P30D\n"


# ------------------------------------------------------------------------------- Apache Phoenix
def test_phoenix_date_arithmetic_and_cdc_poll(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE T (K INTEGER NOT NULL, V1 INTEGER, CONSTRAINT PK PRIMARY KEY (K))")
        conn.execute("CREATE CDC C ON T INCLUDE (PRE, POST)")
        conn.execute("UPSERT INTO T (K, V1) VALUES (1, 2)")
        day = conn.execute("SELECT K FROM C WHERE PHOENIX_ROW_TIMESTAMP() >= CURRENT_DATE() - 1")
        assert day.rows == [(1,)]
        # 8.64 ms ago (1e-7 of a day): the change is older than that once 50 ms have passed
        time.sleep(0.05)
        assert (
            conn.execute("SELECT K FROM C WHERE PHOENIX_ROW_TIMESTAMP() >= CURRENT_DATE() - 0.0000001").rows
            == []
        )
        spans = conn.execute(
            "SELECT K FROM C WHERE PHOENIX_ROW_TIMESTAMP() - TO_DATE('2020-01-01') > 365.25"
            " AND PHOENIX_ROW_TIMESTAMP() < TO_DATE('2020-01-01') + 100000"
        )
        assert spans.rows == [(1,)]
    out = _cli("cdc-poll", "--db", str(db), "C", "--from", "yesterday")
    assert out.returncode == 1
    assert out.stderr == (
        'ERROR: --from: Unparseable date: "yesterday"; give epoch milliseconds or a date and time such as '
        "'2026-01-01 00:00:00' (GMT)\n"
    )
    out = _cli("sql", "--db", str(db), "CREATE CDC C ON NOPE")
    assert out.stderr == "ERROR 1012 (42M03): Table undefined. tableName=NOPE\n"


# ---------------------------------------------------------------------------------------- fuzz
LITERALS = [
    "'x'",
    "1.5",
    "99999999999999999999999",
    "-1",
    "TRUE",
    "'2020-13-01'",
    "ARRAY[1]",
    "X'00ff'",
    "'{bad'",
]
CRDB_TYPES = ["INT2", "INT8", "FLOAT8", "DECIMAL(5,2)", "STRING", "BYTES", "BOOL", "DATE", "TIMESTAMP",
              "TIMESTAMPTZ", "INTERVAL", "UUID", "JSONB", "INET", "BIT(3)", "INT8[]"]  # fmt: skip
YDB_TYPES = ["Uint8", "Int32", "Uint64", "Double", "Decimal(22,9)", "Utf8", "String", "Bool", "Date",
             "Datetime", "Timestamp", "Interval", "Json", "Uuid"]  # fmt: skip
CQL_TYPES = ["int", "bigint", "smallint", "varint", "float", "decimal", "text", "ascii", "blob", "boolean",
             "date", "timestamp", "time", "uuid", "timeuuid", "inet", "duration"]  # fmt: skip


def test_wrong_typed_literals_in_every_dialect(tmp_path: Path) -> None:
    seen: list[str] = []
    with changefeed.connect(tmp_path / "db") as sql:
        sql.execute(
            "CREATE TABLE c (id INT PRIMARY KEY, "
            + ", ".join(f"c{i} {t}" for i, t in enumerate(CRDB_TYPES))
            + ")"
        )
        sql.execute(
            "CREATE TABLE y (id Uint64, "
            + ", ".join(f"c{i} {t}" for i, t in enumerate(YDB_TYPES))
            + ", PRIMARY KEY (id))"
        )
        statements = [
            f"INSERT INTO c (id, c{i}) VALUES (1, {lit})" for i in range(len(CRDB_TYPES)) for lit in LITERALS
        ]
        statements += [
            f"UPSERT INTO y (id, c{i}) VALUES (1, {lit})" for i in range(len(YDB_TYPES)) for lit in LITERALS
        ]
        statements += [
            f"SELECT {a} {op} {b}" for a, b in itertools.product(LITERALS[:6], repeat=2) for op in "+-*/"
        ]
        statements += [f"SELECT {lit} = c{i} FROM c" for i in range(len(CRDB_TYPES)) for lit in LITERALS]
        for text in statements:
            try:
                sql.execute(text)
            except ChangefeedError as exc:
                seen.append(str(exc))
                assert clean(str(exc)), f"{text}: {exc}"
    with changefeed.connect(tmp_path / "db", dialect="cql") as cql:
        cql.execute(
            "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        cql.execute(
            "CREATE TABLE ks.t (k int PRIMARY KEY, "
            + ", ".join(f"c{i} {t}" for i, t in enumerate(CQL_TYPES))
            + ")"
        )
        for i, lit in itertools.product(
            range(len(CQL_TYPES)), ["'x'", "1.5", "99999999999999999999999", "true", "0x00ff"]
        ):
            try:
                cql.execute(f"INSERT INTO ks.t (k, c{i}) VALUES (1, {lit})")
            except ChangefeedError as exc:
                seen.append(str(exc))
                assert clean(str(exc)), f"{CQL_TYPES[i]} {lit}: {exc}"
    assert len(seen) > 200  # most of them are wrong, and each said so cleanly
