"""Bad input gives one clear error from the package's hierarchy and changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed import exceptions as exc


def snapshot(conn: changefeed.Connection) -> tuple[Any, ...]:
    """Everything a statement could have changed: rows, log, change stream, catalog."""
    db = conn.db
    tables = tuple(
        r for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    )
    contents = tuple(
        tuple(db.conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall())
        for (t,) in tables
        if t not in ("_clock", "sqlite_sequence")
    )
    return tables, contents


@pytest.fixture
def cql(tmp_path: Path) -> Any:
    conn = changefeed.connect(tmp_path / "db", dialect="cql")
    conn.execute(
        "CREATE TABLE ks.t (pk int, ck int, s int static, v int, t text, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    )
    conn.execute("INSERT INTO ks.t (pk, ck, v, t) VALUES (1, 1, 1, 'a')")
    yield conn
    conn.close()


@pytest.fixture
def sql(tmp_path: Path) -> Any:
    conn = changefeed.connect(tmp_path / "sqldb", dialect="sql")
    conn.execute(
        "CREATE TABLE orders (id Uint64, amount Decimal(10,2), name Utf8, d Date, PRIMARY KEY (id)) WITH (CHANGES = TRUE)"
    )
    conn.execute(
        "CREATE TABLE foo (id INT PRIMARY KEY, name STRING NOT NULL, tags STRING[], bits BIT(3), iv INTERVAL)"
    )
    conn.execute("UPSERT INTO orders (id, amount, name) VALUES (1, 1.5, 'x')")
    conn.execute("INSERT INTO foo VALUES (1, 'Carl', ARRAY['a'], B'101')")
    yield conn
    conn.close()


CQL_BAD = [
    ("SELEC * FROM ks.t", exc.StatementSyntaxError, "line 1, column 1"),
    ("INSERT INTO ks.t (pk, ck, v VALUES (1, 2, 3)", exc.StatementSyntaxError, "expected"),
    ("INSERT INTO ks.nope (pk) VALUES (1)", exc.UndefinedTable, "ks.nope"),
    ("INSERT INTO ks.t (pk, ck, nope) VALUES (1, 2, 3)", exc.UndefinedColumn, "nope"),
    (
        "INSERT INTO ks.t (pk, ck, v) VALUES (1, 2, 'x')",
        exc.TypeMismatch,
        'Invalid STRING constant (x) for "v"',
    ),
    ("INSERT INTO ks.t (pk, ck, v) VALUES (1, 2, 3000000000)", exc.TypeMismatch, "out of range"),
    ("INSERT INTO ks.t (pk, v) VALUES (1, 2)", exc.InvalidStatement, "ck"),
    ("UPDATE ks.t SET v = 1 WHERE pk = 1", exc.InvalidStatement, "ck"),
    ("UPDATE ks.t SET pk = 1 WHERE pk = 1 AND ck = 1", exc.InvalidStatement, "primary key"),
    ("DELETE FROM ks.t WHERE ck = 1", exc.InvalidStatement, "partition key"),
    ("DELETE FROM ks.t WHERE pk = 1 AND v > 1", exc.InvalidStatement, "v"),
    (
        "CREATE TABLE ks.u (a int PRIMARY KEY) WITH cdc = {'enabled': true, 'preimage': 'bogus'}",
        exc.InvalidOption,
        "preimage",
    ),
    (
        "CREATE TABLE ks.u (a int PRIMARY KEY) WITH cdc = {'enabled': true, 'nope': 1}",
        exc.InvalidOption,
        "nope",
    ),
    ("CREATE TABLE ks.u (a int PRIMARY KEY) WITH nope = 1", exc.InvalidOption, "nope"),
    ("CREATE TABLE ks.u (a int PRIMARY KEY) WITH cdc = 'true'", exc.InvalidOption, "takes a map"),
    ("ALTER TABLE ks.t WITH cdc = 1", exc.InvalidOption, "takes a map"),
    ("CREATE TABLE ks.t (a int PRIMARY KEY)", exc.DuplicateObject, "already exists"),
    ("CREATE TABLE ks.u (a int, b int static, PRIMARY KEY (a))", exc.InvalidStatement, "static"),
    ("CREATE TABLE ks.u (a nosuchtype PRIMARY KEY)", exc.UndefinedObject, "nosuchtype"),
    ("SELECT * FROM ks.u_scylla_cdc_log", exc.UndefinedTable, "u_scylla_cdc_log"),
    (
        "BEGIN BATCH INSERT INTO ks.t (pk, ck, v) VALUES (5, 5, 5); INSERT INTO ks.t (pk, ck, v) VALUES (6, 6, 'bad'); APPLY BATCH",
        exc.TypeMismatch,
        'for "v" of type int',
    ),
]


@pytest.mark.parametrize(("stmt", "error", "text"), CQL_BAD, ids=[s for s, _, _ in CQL_BAD])
def test_cql_bad_input_changes_nothing(
    cql: changefeed.Connection, stmt: str, error: type[Exception], text: str
) -> None:
    before = snapshot(cql)
    with pytest.raises(error) as info:
        cql.execute(stmt)
    assert isinstance(info.value, exc.ChangefeedError)
    assert text.lower() in str(info.value).lower()
    assert snapshot(cql) == before


SQL_BAD = [
    (
        "INSERT INTO orders (id, name) VALUES (1, 'dup')",
        exc.UniqueViolation,
        'violates unique constraint "orders_pkey"',
    ),
    ("UPSERT INTO orders (id) VALUES (-1)", exc.TypeMismatch, "out of range"),
    ("UPSERT INTO orders (id, amount) VALUES (2, 123456789.5)", exc.TypeMismatch, "out of range"),
    ("UPSERT INTO orders (id, d) VALUES (2, Date('2022-13-01'))", exc.TypeMismatch, "Date"),
    ("UPSERT INTO orders (id, name) VALUES (2, 5)", exc.TypeMismatch, "name"),
    ("INSERT INTO foo (id) VALUES (2)", exc.NotNullViolation, "name"),
    ("UPDATE foo SET name = NULL WHERE id = 1", exc.NotNullViolation, "name"),
    ("INSERT INTO foo (id, name, bits) VALUES (2, 'x', B'1')", exc.TypeMismatch, "bit"),
    ("INSERT INTO foo (id, name, tags) VALUES (2, 'x', ARRAY[1])", exc.TypeMismatch, "string[]"),
    ("UPSERT INTO nope (id) VALUES (1)", exc.UndefinedTable, "nope"),
    # an INTERVAL column holds days and time only: months are refused, not folded into 30 days
    ("INSERT INTO foo (id, name, iv) VALUES (2, 'x', '1 month')", exc.UnsupportedFeature, "months or years"),
    ("UPDATE foo SET iv = interval '1 year' WHERE id = 1", exc.UnsupportedFeature, "cannot be stored"),
    ("INSERT INTO foo (id, name, iv) VALUES (2, 'x', '1 fortnight')", exc.InvalidDatetimeFormat, "interval"),
    ("SELECT '2 mons 3 fortnights'::interval", exc.InvalidDatetimeFormat, "interval"),
    ("SELECT nope FROM orders", exc.UndefinedColumn, "nope"),
    ("UPDATE orders SET amount = amount / 0 WHERE id = 1", exc.InvalidStatement, "division by zero"),
    ("ALTER TABLE orders ADD CHANGEFEED f WITH (FORMAT = 'JSON')", exc.InvalidOption, "MODE"),
    (
        "ALTER TABLE orders ADD CHANGEFEED f WITH (FORMAT = 'XML', MODE = 'UPDATES')",
        exc.InvalidOption,
        "FORMAT",
    ),
    (
        "ALTER TABLE orders ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES', RETENTION_PERIOD = Interval('P31D'))",
        exc.InvalidOption,
        "Invalid retention period: specified: P31D, min: PT1S, max: P30D",
    ),
    (
        "ALTER TABLE foo ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES', TOPIC_MIN_ACTIVE_PARTITIONS = 4)",
        exc.InvalidOption,
        "Uint64 or Uint32",
    ),
    ("CREATE TABLE u (id INT PRIMARY KEY, v TEXT) WITH (cdc = 'x')", exc.InvalidOption, "takes a map"),
    (
        "ALTER TABLE nope ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')",
        exc.UndefinedTable,
        "nope",
    ),
    (
        "UPSERT INTO orders (id, name) VALUES (3, 'ok'); UPSERT INTO orders (id, name) VALUES (4, 4)",
        exc.TypeMismatch,
        "name",
    ),
]


@pytest.mark.parametrize(("stmt", "error", "text"), SQL_BAD, ids=[s for s, _, _ in SQL_BAD])
def test_sql_bad_input_changes_nothing(
    sql: changefeed.Connection, stmt: str, error: type[Exception], text: str
) -> None:
    if ";" in stmt:  # a script: statements before the failing one commit (autocommit), so start in a txn
        before = snapshot(sql)
        with pytest.raises(error), sql.transaction():
            sql.execute(stmt)
        assert snapshot(sql) == before
        return
    before = snapshot(sql)
    with pytest.raises(error) as info:
        sql.execute(stmt)
    assert text.lower() in str(info.value).lower()
    assert snapshot(sql) == before


def test_oversized_value(cql: changefeed.Connection) -> None:
    before = snapshot(cql)
    with pytest.raises(exc.ValueTooLarge):
        cql.execute("INSERT INTO ks.t (pk, ck, t) VALUES (1, 2, ?)", ["x" * (9 * 1024 * 1024)])
    assert snapshot(cql) == before


def test_duplicate_feed_name_and_missing_feed(sql: changefeed.Connection) -> None:
    sql.execute("ALTER TABLE orders ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
    before = snapshot(sql)
    with pytest.raises(exc.DuplicateObject):
        sql.execute("ALTER TABLE orders ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
    with pytest.raises(exc.UndefinedObject):
        sql.execute("ALTER TABLE orders DROP CHANGEFEED nope")
    assert snapshot(sql) == before


def test_aborted_transaction_rolls_back_everything(sql: changefeed.Connection) -> None:
    before = snapshot(sql)
    sql.execute("BEGIN")
    sql.execute("UPSERT INTO orders (id, name) VALUES (10, 'a')")
    with pytest.raises(exc.TypeMismatch):
        sql.execute("UPSERT INTO orders (id, name) VALUES (11, 11)")
    with pytest.raises(exc.TransactionError, match="aborted"):
        sql.execute("UPSERT INTO orders (id, name) VALUES (12, 'c')")
    with pytest.raises(exc.TransactionError):
        sql.execute("COMMIT")
    assert snapshot(sql) == before
    with pytest.raises(exc.TransactionError):
        sql.execute("COMMIT")


def test_not_a_database_directory(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("hello")
    with pytest.raises(exc.DatabaseError, match="not a changefeed database"):
        changefeed.connect(tmp_path / "other")
    (tmp_path / "file").write_text("x")
    with pytest.raises(exc.DatabaseError, match="not a directory"):
        changefeed.connect(tmp_path / "file")
    assert (tmp_path / "other" / "notes.txt").read_text() == "hello"


def test_corrupt_database_file(tmp_path: Path) -> None:
    db = tmp_path / "db"
    changefeed.connect(db).close()
    (db / "changefeed.db").write_bytes(b"this is not sqlite" * 100)
    for f in db.glob("changefeed.db-*"):
        f.unlink()
    with pytest.raises(exc.CorruptFile, match=r"changefeed\.db"):
        changefeed.connect(db)


def test_cli_error_message_and_exit_code(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from changefeed.cli.main import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["sql", "--db", str(tmp_path / "db"), "SELECT * FROM\n WHERE"])
    assert res.exit_code == 1
    assert "ERROR: syntax error at line 2" in res.output
    res = runner.invoke(cli, ["sql", "--db", str(tmp_path / "db"), "SELECT * FROM nope"])
    assert res.exit_code == 1 and 'ERROR: table "nope" does not exist' in res.output


def test_errors_survive_pickling() -> None:
    """A process pool's or Spark's worker sends its error back pickled: every error comes back as
    it was (a UniqueViolation, built from its table and key, did not, and hung the pool)."""
    import pickle

    dup = exc.UniqueViolation("t", "id", "1")
    dup.row = 4
    back = pickle.loads(pickle.dumps(dup))
    assert (type(back), str(back), back.detail, back.constraint, back.row, back.code) == (
        exc.UniqueViolation,
        str(dup),
        "Key (id)=(1) already exists.",
        "t_pkey",
        4,
        "23505",
    )
    syntax = exc.SyntaxError_("unexpected 'x'", line=2, column=5)
    back_syntax = pickle.loads(pickle.dumps(syntax))
    assert (str(back_syntax), back_syntax.line, back_syntax.column) == (str(syntax), 2, 5)
    for cls in vars(exc).values():
        if isinstance(cls, type) and issubclass(cls, exc.ChangefeedError):
            try:
                made = cls("something went wrong")
            except TypeError:
                continue  # built from its parts (above)
            again = pickle.loads(pickle.dumps(made))
            assert (type(again), str(again), again.code) == (cls, str(made), made.code)
