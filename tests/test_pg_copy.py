"""COPY .. FROM STDIN and COPY .. TO STDOUT through the PostgreSQL endpoint, with the clients
that speak them: psql's ``\\copy``, psycopg's ``cursor.copy()`` (text and binary), asyncpg's
``copy_records_to_table`` / ``copy_from_query``. Then the formats' readers against chunking
(every split of the input gives the same rows), the statement's options and errors, and what a
COPY leaves: all of its rows or none, each in the table's changefeed exactly once."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from changefeed import exceptions as exc
from changefeed.pipeline.baseline import deliver_all
from changefeed.server.pg.copy_data import SIGNATURE, binary_row, reader_for
from changefeed.server.pg.copy_spec import parse_copy
from changefeed.testing.validators import validate_feed
from tests.pg_server import RunningServer, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    s = start_server(tmp_path_factory.mktemp("copy") / "db")
    yield s
    s.stop()


def _psql(server: RunningServer, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("psql")
    assert exe, "psql is missing: `make setup` installs Debian's postgresql-client"
    return subprocess.run(
        [exe, "-h", server.host, "-p", str(server.port), "-U", "root", "-d", "defaultdb", "-X", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _sql(server: RunningServer, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(server.dsn(), autocommit=True) as c:
        cur = c.execute(sql)
        return cur.fetchall() if cur.description else []


# ------------------------------------------------------------------------------------- psql
def test_psql_copy_csv_and_text_both_ways(server: RunningServer, tmp_path: Path) -> None:
    _sql(server, "CREATE TABLE pc (id INT PRIMARY KEY, v TEXT, n INT)")
    csv_in = tmp_path / "in.csv"
    csv_in.write_text('id,v,n\n1,hello,10\n2,"a,b",\n3,"",30\n4,"two\nlines",40\n')
    txt_in = tmp_path / "in.txt"
    txt_in.write_text("5\tx\\ty\t50\n6\t\\N\t\\N\n7\tback\\\\slash\t\\N\n")
    r = _psql(server, "-c", f"\\copy pc from '{csv_in}' csv header", "-c", f"\\copy pc from '{txt_in}'")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["COPY 4", "COPY 3"]
    assert _sql(server, "SELECT id, v, n FROM pc ORDER BY id") == [
        (1, "hello", 10),
        (2, "a,b", None),
        (3, "", 30),
        (4, "two\nlines", 40),
        (5, "x\ty", 50),
        (6, None, None),
        (7, "back\\slash", None),
    ]
    out = _psql(server, "-c", "\\copy pc to stdout csv header")
    assert out.stdout == (
        'id,v,n\n1,hello,10\n2,"a,b",\n3,"",30\n4,"two\nlines",40\n5,x\ty,50\n6,,\n7,back\\slash,\n'
    )
    out = _psql(server, "-c", "\\copy (SELECT id, v FROM pc WHERE id >= 5) to stdout")
    assert out.stdout == "5\tx\\ty\n6\t\\N\n7\tback\\\\slash\n"


@pytest.mark.parametrize(
    ("data", "options", "error", "context"),
    [
        ("9,dup\n1,again\n", "(id, v) from stdin csv", "duplicate key value", "COPY pe, line 2"),
        (
            "9\tx\t12a\n",
            "from stdin",
            'could not parse "12a" as type int',
            'COPY pe, line 1, column n: "12a"',
        ),
        ("9\tx\n", "from stdin", 'missing data for column "n"', 'COPY pe, line 1: "9\tx"'),
        ("9\tx\t1\t2\n", "from stdin", "extra data after last expected column", "COPY pe, line 1"),
        (
            "9,x,1\n",
            "from stdin csv quote '''' delimiter ''''",
            "COPY delimiter and quote must be different",
            None,
        ),
    ],
)
def test_psql_copy_errors_name_their_line(
    server: RunningServer, data: str, options: str, error: str, context: str | None
) -> None:
    _sql(server, "CREATE TABLE IF NOT EXISTS pe (id INT PRIMARY KEY, v TEXT, n INT)")
    _sql(server, "UPSERT INTO pe VALUES (1, 'one', 1)")
    r = _psql(server, "-c", f"\\copy pe {options}", stdin=data)
    assert f"ERROR:  {error}" in r.stderr, r.stderr
    if context:
        assert f"CONTEXT:  {context}" in r.stderr, r.stderr
    assert _sql(server, "SELECT id FROM pe") == [(1,)]  # nothing of the COPY stays


def test_server_files_and_programs_are_refused(server: RunningServer) -> None:
    import psycopg

    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS pf (id INT PRIMARY KEY)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="file on the server"):
            c.execute("COPY pf FROM '/etc/passwd'")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="program"):
            c.execute("COPY pf TO PROGRAM 'cat'")
        with pytest.raises(psycopg.errors.UndefinedTable, match='relation "nope" does not exist'):
            c.execute("COPY nope FROM STDIN")


# ----------------------------------------------------------------------------------- psycopg
ROWS = [
    (
        i,
        f"v{i}" if i % 7 else None,
        i * 3,
        i / 4,
        i % 2 == 0,
        dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i),
        bytes([i % 256, 9]),
    )
    for i in range(3000)
]
TYPES = ["int8", "text", "int8", "float8", "bool", "timestamp", "bytea"]


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_copy_round_trips_every_type(server: RunningServer, binary: bool) -> None:
    import psycopg

    table = f"py_{'bin' if binary else 'txt'}"
    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute(
            f"CREATE TABLE {table} (id INT PRIMARY KEY, v TEXT, n INT, f FLOAT, b BOOL, ts TIMESTAMP, by BYTES)"
        )
        fmt = " (FORMAT binary)" if binary else ""
        with c.cursor() as cur, cur.copy(f"COPY {table} FROM STDIN{fmt}") as cp:
            if binary:
                cp.set_types(TYPES)
            for row in ROWS:
                cp.write_row(row)
        assert c.execute(f"SELECT * FROM {table} ORDER BY id").fetchall() == ROWS
        with c.cursor() as cur, cur.copy(f"COPY {table} TO STDOUT{fmt}") as cp:
            if binary:
                cp.set_types(TYPES)
            got = list(cp.rows())
        if binary:
            assert got == ROWS
        else:
            assert got[:2] == [
                ("0", None, "0", "0", "t", "2024-01-01 00:00:00", "\\x0009"),
                ("1", "v1", "3", "0.25", "f", "2024-01-01 00:00:01", "\\x0109"),
            ]


def test_copy_is_atomic_and_copyfail_writes_nothing(server: RunningServer) -> None:
    """A COPY of several chunks (over a megabyte) that fails at its last row leaves nothing; so
    does one the client abandons (CopyFail, 57014). Inside a transaction the error aborts it."""
    import psycopg

    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute("CREATE TABLE at (id INT PRIMARY KEY, v TEXT)")
        with (
            pytest.raises(psycopg.errors.UniqueViolation),
            c.cursor() as cur,
            cur.copy("COPY at FROM STDIN") as cp,
        ):
            for i in range(60_000):
                cp.write_row((i, "x" * 20))
            cp.write_row((5, "again"))
        assert c.execute("SELECT count(*) FROM at").fetchone() == (0,)

        class Abandon(Exception):
            pass

        # psycopg sends CopyFail with the error's text; the server answers 57014.
        with pytest.raises(Abandon), c.cursor() as cur, cur.copy("COPY at FROM STDIN") as cp:
            cp.write_row((1, "a"))
            raise Abandon("changed my mind")
        assert c.execute("SELECT count(*) FROM at").fetchone() == (0,)
        c.autocommit = False
        with c.cursor() as cur, cur.copy("COPY at FROM STDIN") as cp:
            cp.write_row((1, "a"))
        c.execute("INSERT INTO at VALUES (2, 'b')")
        c.commit()
        with (
            pytest.raises(psycopg.errors.UniqueViolation),
            c.cursor() as cur,
            cur.copy("COPY at FROM STDIN") as cp,
        ):
            cp.write_row((2, "dup"))
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            c.execute("SELECT 1")
        c.rollback()
        assert c.execute("SELECT id FROM at ORDER BY id").fetchall() == [(1,), (2,)]


# ----------------------------------------------------------------------------------- asyncpg
def test_asyncpg_copy_records_and_query(server: RunningServer) -> None:
    import asyncpg

    async def go() -> tuple[str, list[Any], bytes]:
        c = await asyncpg.connect(
            host=server.host, port=server.port, user="root", database="defaultdb", ssl=False
        )
        try:
            await c.execute("CREATE TABLE ap (id INT PRIMARY KEY, v TEXT, n INT, ts TIMESTAMP)")
            records = [
                (i, None if i % 5 == 0 else f"r{i}", -i, dt.datetime(2020, 5, 1, 12) + dt.timedelta(days=i))
                for i in range(2500)
            ]
            status = await c.copy_records_to_table("ap", records=records)
            got = [tuple(r) for r in await c.fetch("SELECT id, v, n, ts FROM ap ORDER BY id")]
            assert got == records
            import io

            buf = io.BytesIO()
            await c.copy_from_query("SELECT id, v FROM ap WHERE id < 3", output=buf, format="csv")
            return status, got[:1], buf.getvalue()
        finally:
            await c.close()

    status, _, csv_out = asyncio.run(go())
    assert status == "COPY 2500"
    assert csv_out == b"0,\n1,r1\n2,r2\n"


# ------------------------------------------------------------------------ the changefeed's view
def test_copied_rows_reach_the_changefeed_exactly_once(tmp_path: Path) -> None:
    import psycopg

    import changefeed

    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")
        conn.execute("ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')")
    s = start_server(db)
    try:
        with psycopg.connect(s.dsn(), autocommit=True) as c:
            with c.cursor() as cur, cur.copy("COPY t FROM STDIN") as cp:
                for i in range(5000):
                    cp.write_row((i, f"v{i}"))
            with c.cursor() as cur, cur.copy("COPY t FROM STDIN WITH (FORMAT csv)") as cp:
                cp.write(b"5000,new\n5001,newer\n")
            c.execute("UPSERT INTO t VALUES (1, 'updated')")
    finally:
        s.stop()
    deliver_all(db)
    report = validate_feed(db, "t/f")
    assert report.ok, str(report)
    with changefeed.connect(db) as conn:
        assert conn.execute("SELECT count(*), min(v) FROM t WHERE id IN (1, 5000, 5001)").rows == [(3, "new")]


# --------------------------------------------------------------------------------- the readers
def _chunked(spec_sql: str, names: list[str], data: bytes, step: int) -> list[tuple[Any, ...]]:
    reader = reader_for(parse_copy(spec_sql), names)  # type: ignore[arg-type]
    rows: list[tuple[Any, ...]] = []
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
        cols, n, _ = reader.take(final=False)
        rows += list(zip(*cols, strict=True)) if n else []
    cols, n, _ = reader.take(final=True)
    return rows + (list(zip(*cols, strict=True)) if n else [])


FORMAT_CASES = [
    (
        "COPY t FROM STDIN",
        b"1\ta\\tb\t\\N\n2\t\\\\x\t3\n3\t\\101\\x42\tz\n",
        [("1", "a\tb", None), ("2", "\\x", "3"), ("3", "AB", "z")],
    ),
    ("COPY t FROM STDIN (HEADER)", b"a\tb\tc\r\n1\tx\ty\r\n\\.\r\nignored\n", [("1", "x", "y")]),
    (
        "COPY t FROM STDIN (DELIMITER '|', NULL 'nil')",
        b"1|nil|\n2|a\\|b|nil\n",
        [("1", None, ""), ("2", "a|b", None)],
    ),
    (
        "COPY t FROM STDIN CSV HEADER",
        b'a,b,c\n1,"x,y",\n2,"","q""t"\n3,"l1\nl2",z\n',
        [("1", "x,y", None), ("2", "", 'q"t'), ("3", "l1\nl2", "z")],
    ),
    (
        "COPY t FROM STDIN (FORMAT csv, NULL 'N', QUOTE '''')",
        b"1,'a''b',N\n2,'N',x\n",
        [("1", "a'b", None), ("2", "N", "x")],
    ),
    # \. alone on a line ends CSV data too (psql sends it after inline data); inside quotes it is data.
    (
        "COPY t FROM STDIN CSV",
        b'1,a,b\n2,"x\n\\.\n",y\n\\.\n3,no,more\n',
        [("1", "a", "b"), ("2", "x\n\\.\n", "y")],
    ),
    # A backslash before a newline makes it data; an escaped carriage return is data too.
    (
        "COPY t FROM STDIN",
        b"1\ttwo\\\nlines\t\\\r\n2\tx\\\\\ty\n",
        [("1", "two\nlines", "\r"), ("2", "x\\", "y")],
    ),
    # Octal and hex escapes are bytes, read as UTF-8 with the rest of the field.
    ("COPY t FROM STDIN", b"1\tcaf\\303\\251\t\\x41\n", [("1", "caf\u00e9", "A")]),
    (
        "COPY t FROM STDIN (FORMAT binary)",
        SIGNATURE
        + struct.pack("!ii", 0, 0)
        + binary_row([b"\x01", None, b"xyz"])
        + binary_row([b"", b"q", b"r"])
        + struct.pack("!h", -1),
        [(b"\x01", None, b"xyz"), (b"", b"q", b"r")],
    ),
]


def test_an_empty_line_is_a_row_of_one_empty_field() -> None:
    assert _chunked("COPY t FROM STDIN", ["a"], b"\n", 1) == [("",)]
    assert _chunked("COPY t FROM STDIN", ["a"], b"x\n\ny\n", 100) == [("x",), ("",), ("y",)]


@pytest.mark.parametrize(("spec", "data", "rows"), FORMAT_CASES)
def test_readers_give_the_same_rows_however_the_data_is_cut(
    spec: str, data: bytes, rows: list[tuple[Any, ...]]
) -> None:
    for step in (1, 2, 3, 7, len(data)):
        assert _chunked(spec, ["a", "b", "c"], data, step) == rows, step


@pytest.mark.parametrize(
    ("spec", "data", "error"),
    [
        (
            "COPY t FROM STDIN (FORMAT binary)",
            b"PGCOPY\nxx" + b"\x00" * 12,
            "COPY file signature not recognized",
        ),
        (
            "COPY t FROM STDIN (FORMAT binary)",
            SIGNATURE + struct.pack("!ii", 0, 0) + binary_row([b"1"]),
            "row field count is 1, expected 3",
        ),
        (
            "COPY t FROM STDIN (FORMAT binary)",
            SIGNATURE + struct.pack("!ii", 0, 0) + b"\x00\x03\x00\x00",
            "unexpected EOF in COPY data",
        ),
        ("COPY t FROM STDIN CSV", b'1,"open\n', "unterminated CSV quoted field"),
        ("COPY t FROM STDIN", b"1\t\xff\t3\n", 'invalid byte sequence for encoding "UTF8": 0xff'),
        ("COPY t FROM STDIN", b"1\t\\0\t3\n", 'invalid byte sequence for encoding "UTF8": 0x00'),
        # The first line's end is every line's.
        ("COPY t FROM STDIN", b"1\ta\tb\n2\tc\td\r\n", "literal carriage return found in data"),
        ("COPY t FROM STDIN", b"1\ta\tb\r\n2\tc\td\n", "literal newline found in data"),
        # Too many fields in one line and too few in the next: not paired up across lines.
        ("COPY t FROM STDIN", b"1\tb\t2\t9\n3\tx\n", "extra data after last expected column"),
        (
            "COPY t FROM STDIN (FORMAT binary)",
            SIGNATURE + struct.pack("!ii", 0, 0) + struct.pack("!h", -1) + b"more",
            "received copy data after EOF marker",
        ),
    ],
)
def test_readers_refuse_malformed_data(spec: str, data: bytes, error: str) -> None:
    with pytest.raises(exc.ChangefeedError, match=error):
        _chunked(spec, ["a", "b", "c"], data, len(data))


@pytest.mark.parametrize(
    ("sql", "error", "code"),
    [
        ("COPY t FROM STDIN (FORMAT xml)", 'COPY format "xml" not recognized', "0A000"),
        ("COPY t FROM STDIN (bogus 1)", 'option "bogus" not recognized', "42601"),
        ("COPY t FROM STDIN (FORMAT csv, FORMAT text)", "conflicting or redundant options", "42601"),
        ("COPY t FROM STDIN (FORMAT binary, NULL 'x')", "cannot specify NULL in BINARY mode", "42601"),
        ("COPY t FROM STDIN (QUOTE '\"')", "COPY quote available only in CSV mode", "0A000"),
        ("COPY t FROM STDIN (DELIMITER '||')", "COPY delimiter must be a single one-byte character", "0A000"),
        ("COPY t FROM STDIN (HEADER maybe)", "header requires a Boolean value", "22023"),
        (
            "COPY t FROM STDIN (FORMAT csv, ESCAPE '\\')",
            "COPY ESCAPE other than the QUOTE character is not supported",
            "0A000",
        ),
        ("COPY t FROM STDIN (DELIMITER '\\')", 'COPY delimiter cannot be "\\"', "22023"),
        (
            "COPY t FROM STDIN (FORMAT csv, NULL 'a\"b')",
            "CSV quote character must not appear in the NULL specification",
            "22023",
        ),
        ("COPY t FROM STDIN (ENCODING 'LATIN1')", 'COPY encoding "LATIN1" is not supported', "0A000"),
        (
            "COPY t FROM STDIN (FORMAT csv, FORCE_NULL (a))",
            "COPY option FORCE_NULL is not supported",
            "0A000",
        ),
        ("COPY (SELECT 1) FROM STDIN", "syntax error", "42601"),
        ("COPY t FROM", "syntax error", "42601"),
    ],
)
def test_copy_options_are_checked_as_postgresql_checks_them(sql: str, error: str, code: str) -> None:
    with pytest.raises(exc.ChangefeedError, match=re.escape(error)) as got:
        parse_copy(sql)
    assert got.value.code == code


def test_copy_statement_forms() -> None:
    spec = parse_copy("copy \"My T\" (a, \"B\") from stdin with csv header delimiter as ';' null as 'NULL'")
    assert spec is not None and not spec.to
    assert (spec.table, spec.columns, spec.format, spec.delimiter, spec.null, spec.header) == (
        '"My T"',
        ("a", '"B"'),
        "csv",
        ";",
        "NULL",
        True,
    )
    query = parse_copy("COPY (SELECT a FROM t WHERE b = ')') TO STDOUT (FORMAT binary)")
    assert query is not None and query.to and query.query == "SELECT a FROM t WHERE b = ')'" and query.binary
    assert parse_copy("SELECT 1") is None


def test_copy_needs_the_privileges_of_insert_and_select(server: RunningServer) -> None:
    """COPY FROM needs INSERT (refused before any data is read), COPY TO needs SELECT."""
    import psycopg

    _sql(server, "CREATE TABLE pv (id INT PRIMARY KEY, v TEXT)")
    _sql(server, "CREATE USER copier WITH PASSWORD 'pw'")
    _sql(server, "GRANT SELECT ON pv TO copier")
    with psycopg.connect(server.dsn("copier", "pw"), autocommit=True) as c:
        with (
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="does not have INSERT privilege"),
            c.cursor() as cur,
            cur.copy("COPY pv FROM STDIN") as cp,
        ):
            cp.write_row((1, "a"))
        with c.cursor() as cur, cur.copy("COPY pv TO STDOUT") as cp:
            assert list(cp.rows()) == []
    _sql(server, "REVOKE SELECT ON pv FROM copier")
    with (
        psycopg.connect(server.dsn("copier", "pw"), autocommit=True) as c,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="does not have SELECT privilege"),
        c.cursor() as cur,
        cur.copy("COPY pv TO STDOUT") as cp,
    ):
        list(cp.rows())
    assert _sql(server, "SELECT count(*) FROM pv") == [(0,)]


def test_bad_values_fail_the_copy_and_keep_the_connection(server: RunningServer) -> None:
    import psycopg

    with psycopg.connect(server.dsn(), autocommit=True) as c:
        c.execute("CREATE TABLE bd (id INT PRIMARY KEY, d DECIMAL)")
        for data, error in (
            (b"1\tabc\n", psycopg.errors.InvalidTextRepresentation),
            (b"1\t1e999999999\n", psycopg.DataError),
        ):
            with pytest.raises(error), c.cursor() as cur, cur.copy("COPY bd FROM STDIN") as cp:
                cp.write(data)
            assert c.execute("SELECT count(*) FROM bd").fetchone() == (0,)  # the same connection
        with pytest.raises(psycopg.errors.DuplicateColumn, match='column "id" specified more than once'):
            c.execute("COPY bd (id, id) FROM STDIN")
