"""Tests of changefeed.sql.parser: both dialects, literals, soft keywords, errors and the cache."""

from __future__ import annotations

import math
import uuid
from decimal import Decimal

import pytest

from changefeed.exceptions import StatementSyntaxError, UnsupportedFeature
from changefeed.sql import ast, parser as parser_mod
from changefeed.sql.parser import parse, parse_one

I = ast.Ident  # noqa: E741
L = ast.Literal


def Q(*parts: str) -> ast.QName:
    return ast.QName(tuple(I(p) for p in parts))


def C(name: str, quoted: bool = False) -> ast.Column:
    return ast.Column(I(name, quoted))


def T(name: str, *params: int, array: bool = False) -> ast.TypeName:
    return ast.TypeName(name, params, array)


def eq(left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
    return ast.BinaryOp("=", left, right)


def and_(left: ast.Expr, right: ast.Expr) -> ast.BinaryOp:
    return ast.BinaryOp("AND", left, right)


def where_of(text: str, dialect: parser_mod.Dialect = "cql") -> ast.Expr | None:
    stmt = parse_one(text, dialect)
    assert isinstance(stmt, ast.Select | ast.Update | ast.Delete)
    return stmt.where


def items_of(text: str, dialect: parser_mod.Dialect = "sql") -> list[ast.Expr]:
    stmt = parse_one(text, dialect)
    assert isinstance(stmt, ast.Select)
    return [item.expr for item in stmt.items]


# --------------------------------------------------------------------------------------------------
# The reference scripts, verbatim

CQL_SCRIPT = """\
CREATE TABLE ks.t (pk int, ck int, v1 int, v2 int, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled':'true'};
CREATE TABLE ks.t (pk int, ck int, s int static, c int, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true};
CREATE TABLE ks.t (pk int, ck1 int, ck2 int, ck3 int, v int, primary key (pk, ck1, ck2, ck3)) WITH cdc = {'enabled':'true'};
CREATE TABLE IF NOT EXISTS ks.t2 (a int, b text, c blob, PRIMARY KEY ((a, b), c)) WITH CLUSTERING ORDER BY (c DESC) AND cdc = {'enabled': true, 'preimage': 'full', 'postimage': true, 'delta': 'keys', 'ttl': 3600};
CREATE TABLE ks.u (id int PRIMARY KEY, name text);
CREATE KEYSPACE IF NOT EXISTS ks WITH replication = {'class': 'NetworkTopologyStrategy', 'replication_factor': 1};
USE ks;
UPDATE ks.t SET v1 = 0 WHERE pk = 0 AND ck = 0;
UPDATE ks.t SET v2 = null WHERE pk = 0 AND ck = 0;
UPDATE ks.t USING TTL 10 SET v = 1 WHERE pk = 0 AND ck IN (1, 2);
DELETE v2 FROM ks.t WHERE pk = 0 AND ck = 0;
DELETE FROM ks.t WHERE pk = 0 AND ck = 0;
DELETE FROM ks.t WHERE pk = 0 AND ck <= 2 and ck > 0;
DELETE FROM ks.t WHERE pk = 0 AND CK < 3;
DELETE FROM ks.t WHERE pk = 0 and ck1 = 0 AND ck2 > 0 AND ck2 < 3;
DELETE FROM ks.t WHERE pk = 0;
INSERT INTO ks.t (pk,ck,v) VALUES (0, 0, null);
INSERT INTO ks.t (pk, ck) VALUES (0, 0);
INSERT INTO ks.t (pk, ck, s, c) VALUES (0, 0, 0, 0) IF NOT EXISTS USING TTL 100;
INSERT INTO ks.t (pk, s) VALUES (0, 0);
SELECT * FROM ks.t;
SELECT * from ks.t WHERE pk = 0 AND ck = 0;
SELECT "cdc$batch_seq_no", pk, ck, v1, "cdc$deleted_v1", v2, "cdc$deleted_v2", "cdc$operation" FROM ks.t_scylla_cdc_log;
SELECT count(*) FROM ks.t WHERE pk IN (1, 2) ORDER BY ck DESC LIMIT 10 ALLOW FILTERING;
BEGIN UNLOGGED BATCH
    UPDATE ks.t SET s = 0 WHERE pk = 0;
    UPDATE ks.t SET c = 0 WHERE pk = 0 AND ck = 0;
APPLY BATCH;
BEGIN BATCH USING TIMESTAMP 123 INSERT INTO ks.t (pk, ck) VALUES (0, 0); APPLY BATCH;
ALTER TABLE ks.t ADD v3 text;  ALTER TABLE ks.t DROP v3;  ALTER TABLE ks.t WITH cdc = {'enabled': false};
DROP TABLE IF EXISTS ks.t;
"""

CQL_TYPES = [
    *[ast.CreateTable] * 5,
    ast.CreateKeyspace,
    ast.UseKeyspace,
    *[ast.Update] * 3,
    *[ast.Delete] * 6,
    *[ast.Insert] * 4,
    *[ast.Select] * 4,
    ast.Batch,
    ast.Batch,
    *[ast.AlterTable] * 3,
    ast.DropTable,
]

SQL_SCRIPT = """\
CREATE TABLE orders (id Uint64, customer Utf8, amount Decimal(22,9), created Timestamp, payload String, PRIMARY KEY (id));
CREATE TABLE `my table` (k1 Uint32 NOT NULL, k2 Utf8, v Json, PRIMARY KEY (k1, k2)) WITH (AUTO_PARTITIONING_BY_LOAD = ENABLED, UNIFORM_PARTITIONS = 4);
ALTER TABLE orders ADD CHANGEFEED updates_feed WITH (FORMAT = 'JSON', MODE = 'UPDATES', VIRTUAL_TIMESTAMPS = TRUE, RESOLVED_TIMESTAMPS = Interval("PT1S"), INITIAL_SCAN = TRUE, RETENTION_PERIOD = Interval("PT24H"), TOPIC_MIN_ACTIVE_PARTITIONS = 4);
ALTER TABLE orders DROP CHANGEFEED updates_feed;
ALTER TABLE orders ADD COLUMN note Utf8;  ALTER TABLE orders DROP COLUMN note;  ALTER TABLE office_dogs ADD COLUMN likes_treats BOOL DEFAULT TRUE;
UPSERT INTO orders (id, customer, created) VALUES (1ul, "one", Timestamp("2022-12-12T00:00:00.000000Z")), (2ul, 'two', CurrentUtcTimestamp());
REPLACE INTO orders (id, amount) VALUES (1, Decimal("10.5", 22, 9));
INSERT INTO t (a, b) VALUES (1, Date("2022-02-22")) ;
UPDATE orders SET amount = amount + 1, customer = NULL WHERE id = 1 OR id IN (2, 3) AND NOT (customer IS NULL);
DELETE FROM orders WHERE id > 10 AND created <= Timestamp("2022-12-12T00:00:00Z");
SELECT id, count(*) AS n FROM orders WHERE customer IS NOT NULL AND id BETWEEN 1 AND 5 ORDER BY id DESC LIMIT 3;
CREATE TABLE foo (id INT PRIMARY KEY DEFAULT unique_rowid(), name STRING);
CREATE TABLE office_dogs (id INT PRIMARY KEY, name STRING NOT NULL, tags STRING[], bits BIT(3), vb VARBIT, j JSONB, t TIMESTAMPTZ, d DECIMAL(10,2), f FLOAT, u UUID, ip INET, iv INTERVAL, b BYTES, FAMILY f1 (id, name), FAMILY f2 (tags, bits, vb, j, t, d, f, u, ip, iv, b));
CREATE TABLE x (a INT, b INT AS (a * 2) VIRTUAL, c INT8 ARRAY, PRIMARY KEY (a));
CREATE TYPE status AS ENUM ('open', 'closed');
INSERT INTO foo VALUES (1, 'Carl');
INSERT INTO office_dogs VALUES (1, 'Petee') ON CONFLICT DO NOTHING RETURNING id;
UPDATE foo SET name = 'Petee' WHERE id = 1;
DELETE FROM office_dogs WHERE name = 'Petee';
SELECT * FROM foo AS OF SYSTEM TIME '-1s';
SELECT CAST('1' AS INT), '2'::INT8, ARRAY[1,2], 'a' || 'b', 1 + 2 * 3 - -4 / 2 % 3;
BEGIN; COMMIT; ROLLBACK; BEGIN TRANSACTION; START TRANSACTION; COMMIT TRANSACTION; END;
CREATE CHANGEFEED FOR TABLE foo INTO 'kafka://localhost:9092' WITH UPDATED;
CREATE CHANGEFEED FOR foo, bar INTO 'webhook-https://localhost:3000?insecure_tls_skip_verify=true' WITH updated, resolved = '10s', format = json, envelope = wrapped, diff, mvcc_timestamp, min_checkpoint_frequency = '1s', schema_change_policy = 'backfill', initial_scan = 'no';
EXPERIMENTAL CHANGEFEED FOR cdc_test;
EXPERIMENTAL CHANGEFEED FOR cdc_test WITH format = avro, confluent_schema_registry = 'http://localhost:8081';
EXPERIMENTAL CHANGEFEED FOR TABLE cdc_test FAMILY f1;
EXPERIMENTAL CHANGEFEED FOR TABLE cdc_test WITH split_column_families;
EXPERIMENTAL CHANGEFEED FOR t WITH cursor = '1536242855577149065.0000000000', end_time = "1655402400000000000", initial_scan_only, no_initial_scan;
GRANT CHANGEFEED ON TABLE example_table TO user;
GRANT SELECT, CHANGEFEED ON TABLE a, b TO alice, bob;  REVOKE CHANGEFEED ON TABLE a FROM alice;
ALTER DEFAULT PRIVILEGES GRANT CHANGEFEED ON TABLES TO user;    -- → Grant(tables=()) meaning "default privileges"
CREATE USER alice;  CREATE ROLE IF NOT EXISTS bob WITH CONTROLCHANGEFEED;
CREATE DATABASE IF NOT EXISTS shop; USE shop; DROP TABLE IF EXISTS foo; SHOW TABLES; SHOW CHANGEFEED JOBS; SHOW CREATE TABLE foo;
"""

SQL_TYPES = [
    ast.CreateTable,
    ast.CreateTable,
    *[ast.AlterTable] * 5,
    *[ast.Insert] * 3,
    ast.Update,
    ast.Delete,
    ast.Select,
    *[ast.CreateTable] * 3,
    ast.CreateEnum,
    ast.Insert,
    ast.Insert,
    ast.Update,
    ast.Delete,
    ast.Select,
    ast.Select,
    ast.Begin,
    ast.Commit,
    ast.Rollback,
    ast.Begin,
    ast.Begin,
    ast.Commit,
    ast.Commit,
    *[ast.CreateChangefeed] * 7,
    *[ast.Grant] * 4,
    ast.CreateUser,
    ast.CreateUser,
    ast.CreateKeyspace,
    ast.UseKeyspace,
    ast.DropTable,
    ast.Show,
    ast.Show,
    ast.Show,
]


@pytest.fixture(scope="module")
def cql() -> list[ast.Statement]:
    return parse(CQL_SCRIPT, "cql")


@pytest.fixture(scope="module")
def sql() -> list[ast.Statement]:
    return parse(SQL_SCRIPT, "sql")


def test_cql_script_statement_types(cql: list[ast.Statement]) -> None:
    assert [type(s) for s in cql] == CQL_TYPES


def test_sql_script_statement_types(sql: list[ast.Statement]) -> None:
    assert [type(s) for s in sql] == SQL_TYPES


def test_positions_of_statements(cql: list[ast.Statement], sql: list[ast.Statement]) -> None:
    assert [s.pos.line for s in cql[:7]] == [1, 2, 3, 4, 5, 6, 7]
    assert all(s.pos.column == 1 for s in cql[:25])
    batch = cql[24]
    assert isinstance(batch, ast.Batch)
    assert [s.pos for s in batch.statements] == [ast.Pos(26, 5), ast.Pos(27, 5)]
    assert [s.pos for s in cql[26:29]] == [ast.Pos(30, 1), ast.Pos(30, 32), ast.Pos(30, 59)]
    assert [s.pos for s in sql[23:30]] == [ast.Pos(22, c) for c in (1, 8, 16, 26, 45, 64, 84)]


# --------------------------------------------------------------------------------------------------
# CQL: exact trees


def test_cql_create_table_compound_key_and_options(cql: list[ast.Statement]) -> None:
    cdc = ast.MapLit(
        (
            (L("enabled"), L(True)),
            (L("preimage"), L("full")),
            (L("postimage"), L(True)),
            (L("delta"), L("keys")),
            (L("ttl"), L(3600)),
        )
    )
    assert cql[3] == ast.CreateTable(
        name=Q("ks", "t2"),
        columns=(
            ast.ColumnDef(I("a"), T("int")),
            ast.ColumnDef(I("b"), T("text")),
            ast.ColumnDef(I("c"), T("blob")),
        ),
        primary_key=ast.PrimaryKey(partition=(I("a"), I("b")), clustering=(I("c"),)),
        options=(("cdc", cdc),),
        clustering_order=(ast.ClusteringOrder(I("c"), descending=True),),
        if_not_exists=True,
    )


def test_cql_create_table_simple_key_static_and_inline_key(cql: list[ast.Statement]) -> None:
    first, second, third, _, inline = cql[:5]
    assert isinstance(first, ast.CreateTable)
    assert first.primary_key == ast.PrimaryKey((I("pk"),), (I("ck"),))
    assert first.options == (("cdc", ast.MapLit(((L("enabled"), L("true")),))),)
    assert isinstance(second, ast.CreateTable)
    assert second.columns[2] == ast.ColumnDef(I("s"), T("int"), static=True)
    assert isinstance(third, ast.CreateTable)
    assert third.primary_key == ast.PrimaryKey((I("pk"),), (I("ck1"), I("ck2"), I("ck3")))
    assert inline == ast.CreateTable(
        Q("ks", "u"),
        (ast.ColumnDef(I("id"), T("int"), primary_key=True), ast.ColumnDef(I("name"), T("text"))),
        primary_key=None,
    )


def test_cql_keyspace_and_use(cql: list[ast.Statement]) -> None:
    replication = ast.MapLit(((L("class"), L("NetworkTopologyStrategy")), (L("replication_factor"), L(1))))
    assert cql[5] == ast.CreateKeyspace(I("ks"), True, (("replication", replication),))
    assert cql[6] == ast.UseKeyspace(I("ks"))


def test_cql_update(cql: list[ast.Statement]) -> None:
    assert cql[7] == ast.Update(
        Q("ks", "t"), ((I("v1"), L(0)),), where=and_(eq(C("pk"), L(0)), eq(C("ck"), L(0)))
    )
    assert isinstance(cql[8], ast.Update) and cql[8].assignments == ((I("v2"), L(None)),)
    assert cql[9] == ast.Update(
        Q("ks", "t"),
        ((I("v"), L(1)),),
        where=and_(eq(C("pk"), L(0)), ast.InList(C("ck"), (L(1), L(2)))),
        ttl=L(10),
    )


def test_cql_delete(cql: list[ast.Statement]) -> None:
    assert cql[10] == ast.Delete(
        Q("ks", "t"), columns=(I("v2"),), where=and_(eq(C("pk"), L(0)), eq(C("ck"), L(0)))
    )
    assert cql[12] == ast.Delete(
        Q("ks", "t"),
        where=and_(
            and_(eq(C("pk"), L(0)), ast.BinaryOp("<=", C("ck"), L(2))), ast.BinaryOp(">", C("ck"), L(0))
        ),
    )
    # keywords are case-insensitive, identifiers are kept as written
    assert isinstance(cql[13], ast.Delete)
    assert cql[13].where == and_(eq(C("pk"), L(0)), ast.BinaryOp("<", C("CK"), L(3)))
    assert cql[15] == ast.Delete(Q("ks", "t"), where=eq(C("pk"), L(0)))


def test_cql_insert(cql: list[ast.Statement]) -> None:
    assert cql[16] == ast.Insert(
        Q("ks", "t"), (I("pk"), I("ck"), I("v")), ((L(0), L(0), L(None)),), mode="insert"
    )
    assert cql[18] == ast.Insert(
        Q("ks", "t"),
        (I("pk"), I("ck"), I("s"), I("c")),
        ((L(0), L(0), L(0), L(0)),),
        if_not_exists=True,
        ttl=L(100),
    )


def test_cql_select(cql: list[ast.Statement]) -> None:
    assert cql[20] == ast.Select((ast.SelectItem(ast.Star()),), Q("ks", "t"))
    log = cql[22]
    assert isinstance(log, ast.Select)
    assert log.table == Q("ks", "t_scylla_cdc_log")
    assert log.items[0] == ast.SelectItem(C("cdc$batch_seq_no", quoted=True))
    assert log.items[1] == ast.SelectItem(C("pk"))
    assert cql[23] == ast.Select(
        (ast.SelectItem(ast.FuncCall("count", (ast.Star(),))),),
        Q("ks", "t"),
        where=ast.InList(C("pk"), (L(1), L(2))),
        order_by=(ast.OrderItem(C("ck"), descending=True),),
        limit=L(10),
        allow_filtering=True,
    )


def test_cql_batches(cql: list[ast.Statement]) -> None:
    unlogged, stamped = cql[24], cql[25]
    assert isinstance(unlogged, ast.Batch) and isinstance(stamped, ast.Batch)
    assert unlogged.kind == "unlogged" and unlogged.timestamp is None
    assert unlogged.statements == (
        ast.Update(Q("ks", "t"), ((I("s"), L(0)),), where=eq(C("pk"), L(0))),
        ast.Update(Q("ks", "t"), ((I("c"), L(0)),), where=and_(eq(C("pk"), L(0)), eq(C("ck"), L(0)))),
    )
    assert stamped == ast.Batch(
        (ast.Insert(Q("ks", "t"), (I("pk"), I("ck")), ((L(0), L(0)),)),), "logged", L(123)
    )


def test_cql_alter_and_drop(cql: list[ast.Statement]) -> None:
    assert cql[26] == ast.AlterTable(Q("ks", "t"), (ast.AddColumn(ast.ColumnDef(I("v3"), T("text"))),))
    assert cql[27] == ast.AlterTable(Q("ks", "t"), (ast.DropColumn(I("v3")),))
    assert cql[28] == ast.AlterTable(
        Q("ks", "t"), (ast.SetOptions((("cdc", ast.MapLit(((L("enabled"), L(False)),))),)),)
    )
    assert cql[29] == ast.DropTable(Q("ks", "t"), if_exists=True)


def test_cql_describe() -> None:
    assert parse_one("DESCRIBE TABLE ks.t", "cql") == ast.Show("create table", Q("ks", "t"))
    assert parse_one("desc table t", "cql") == ast.Show("create table", Q("t"))
    assert parse_one("DESC TABLES", "cql") == ast.Show("tables")


def test_cql_collection_types() -> None:
    stmt = parse_one(
        "CREATE TABLE t (a int PRIMARY KEY, m map<text, int>, l frozen<list<int>>, s set<text>)", "cql"
    )
    assert isinstance(stmt, ast.CreateTable)
    assert [c.type.name for c in stmt.columns] == ["int", "map<text, int>", "frozen<list<int>>", "set<text>"]


# --------------------------------------------------------------------------------------------------
# CQL literals


def test_cql_literals() -> None:
    text = (
        "SELECT * FROM t WHERE a = 1e3 AND b = 123e4567-e89b-12d3-a456-426614174000 AND c = -5 "
        "AND d = NaN AND e = -Infinity AND f = 0xCAFE AND g = {'k': [1, 2.5]} AND (h, i) > (1, 2) "
        "AND token(pk) > ? AND j = TRUE AND k = false AND l = 'it''s'"
    )
    where = where_of(text)
    conds = []
    while isinstance(where, ast.BinaryOp) and where.op == "AND":
        conds.append(where.right)
        where = where.left
    conds.append(where)
    conds.reverse()
    rhs = [c.right for c in conds if isinstance(c, ast.BinaryOp)]
    assert rhs[0] == L(1000.0) and isinstance(rhs[0].value, float)
    assert rhs[1] == L(uuid.UUID("123e4567-e89b-12d3-a456-426614174000"))
    assert rhs[2] == L(-5)
    assert isinstance(rhs[3], ast.Literal) and isinstance(rhs[3].value, float) and math.isnan(rhs[3].value)
    assert rhs[4] == L(-math.inf)
    assert rhs[5] == L(b"\xca\xfe")
    assert rhs[6] == ast.MapLit(((L("k"), ast.ArrayLit((L(1), L(Decimal("2.5"))))),))
    assert conds[7] == ast.BinaryOp(">", ast.TupleLit((C("h"), C("i"))), ast.TupleLit((L(1), L(2))))
    assert conds[8] == ast.BinaryOp(">", ast.FuncCall("token", (C("pk"),)), ast.Param(0))
    assert rhs[9:] == [L(True), L(False), L("it's")]


def test_cql_double_quotes_are_always_identifiers() -> None:
    assert where_of('SELECT * FROM t WHERE "Key" = "value"') == eq(C("Key", True), C("value", True))
    stmt = parse_one('INSERT INTO "Ks"."T" ("A") VALUES (1)', "cql")
    assert isinstance(stmt, ast.Insert)
    assert stmt.table == ast.QName((I("Ks", True), I("T", True)))
    assert stmt.columns == (I("A", True),)


def test_cql_using_timestamp_and_ttl_with_params() -> None:
    stmt = parse_one("INSERT INTO t (a, b) VALUES (?, ?) USING TIMESTAMP ? AND TTL ?", "cql")
    assert stmt == ast.Insert(
        Q("t"),
        (I("a"), I("b")),
        ((ast.Param(0), ast.Param(1)),),
        timestamp=ast.Param(2),
        ttl=ast.Param(3),
    )


# --------------------------------------------------------------------------------------------------
# SQL: exact trees


def test_sql_create_table_yql(sql: list[ast.Statement]) -> None:
    assert sql[0] == ast.CreateTable(
        Q("orders"),
        (
            ast.ColumnDef(I("id"), T("Uint64")),
            ast.ColumnDef(I("customer"), T("Utf8")),
            ast.ColumnDef(I("amount"), T("Decimal", 22, 9)),
            ast.ColumnDef(I("created"), T("Timestamp")),
            ast.ColumnDef(I("payload"), T("String")),
        ),
        primary_key=ast.PrimaryKey((I("id"),)),
    )
    assert sql[1] == ast.CreateTable(
        ast.QName((I("my table", True),)),
        (
            ast.ColumnDef(I("k1"), T("Uint32"), not_null=True),
            ast.ColumnDef(I("k2"), T("Utf8")),
            ast.ColumnDef(I("v"), T("Json")),
        ),
        primary_key=ast.PrimaryKey((I("k1"), I("k2"))),
        options=(("auto_partitioning_by_load", L("ENABLED")), ("uniform_partitions", L(4))),
    )


def test_sql_add_changefeed(sql: list[ast.Statement]) -> None:
    assert sql[2] == ast.AlterTable(
        Q("orders"),
        (
            ast.AddChangefeed(
                I("updates_feed"),
                (
                    ("format", L("JSON")),
                    ("mode", L("UPDATES")),
                    ("virtual_timestamps", L(True)),
                    ("resolved_timestamps", ast.FuncCall("Interval", (L("PT1S"),))),
                    ("initial_scan", L(True)),
                    ("retention_period", ast.FuncCall("Interval", (L("PT24H"),))),
                    ("topic_min_active_partitions", L(4)),
                ),
            ),
        ),
    )
    assert sql[3] == ast.AlterTable(Q("orders"), (ast.DropChangefeed(I("updates_feed")),))


def test_sql_alter_columns(sql: list[ast.Statement]) -> None:
    assert sql[4] == ast.AlterTable(Q("orders"), (ast.AddColumn(ast.ColumnDef(I("note"), T("Utf8"))),))
    assert sql[5] == ast.AlterTable(Q("orders"), (ast.DropColumn(I("note")),))
    assert sql[6] == ast.AlterTable(
        Q("office_dogs"), (ast.AddColumn(ast.ColumnDef(I("likes_treats"), T("BOOL"), default=L(True))),)
    )


def test_sql_upsert_yql_literals(sql: list[ast.Statement]) -> None:
    assert sql[7] == ast.Insert(
        Q("orders"),
        (I("id"), I("customer"), I("created")),
        (
            (
                L(1, "ul"),
                C("one", quoted=True),  # the executor turns an unresolvable quoted column into a string
                ast.FuncCall("Timestamp", (L("2022-12-12T00:00:00.000000Z"),)),
            ),
            (L(2, "ul"), L("two"), ast.FuncCall("CurrentUtcTimestamp")),
        ),
        mode="upsert",
    )
    assert isinstance(sql[8], ast.Insert) and sql[8].mode == "replace"
    assert sql[8].rows == ((L(1), ast.FuncCall("Decimal", (L("10.5"), L(22), L(9)))),)
    assert isinstance(sql[9], ast.Insert) and sql[9].mode == "insert"
    assert sql[9].rows == ((L(1), ast.FuncCall("Date", (L("2022-02-22"),))),)


def test_sql_update_precedence(sql: list[ast.Statement]) -> None:
    assert sql[10] == ast.Update(
        Q("orders"),
        ((I("amount"), ast.BinaryOp("+", C("amount"), L(1))), (I("customer"), L(None))),
        where=ast.BinaryOp(
            "OR",
            eq(C("id"), L(1)),
            and_(ast.InList(C("id"), (L(2), L(3))), ast.UnaryOp("NOT", ast.IsNull(C("customer")))),
        ),
    )


def test_sql_delete_and_select(sql: list[ast.Statement]) -> None:
    assert sql[11] == ast.Delete(
        Q("orders"),
        where=and_(
            ast.BinaryOp(">", C("id"), L(10)),
            ast.BinaryOp("<=", C("created"), ast.FuncCall("Timestamp", (L("2022-12-12T00:00:00Z"),))),
        ),
    )
    assert sql[12] == ast.Select(
        (ast.SelectItem(C("id")), ast.SelectItem(ast.FuncCall("count", (ast.Star(),)), I("n"))),
        Q("orders"),
        where=and_(ast.IsNull(C("customer"), negated=True), ast.Between(C("id"), L(1), L(5))),
        order_by=(ast.OrderItem(C("id"), descending=True),),
        limit=L(3),
    )


def test_sql_create_table_cockroach(sql: list[ast.Statement]) -> None:
    assert sql[13] == ast.CreateTable(
        Q("foo"),
        (
            ast.ColumnDef(I("id"), T("INT"), primary_key=True, default=ast.FuncCall("unique_rowid")),
            ast.ColumnDef(I("name"), T("STRING")),
        ),
    )
    dogs = sql[14]
    assert isinstance(dogs, ast.CreateTable)
    assert dogs.primary_key is None
    assert dogs.columns[0] == ast.ColumnDef(I("id"), T("INT"), primary_key=True)
    assert dogs.columns[1] == ast.ColumnDef(I("name"), T("STRING"), not_null=True)
    assert [c.type for c in dogs.columns[2:]] == [
        T("STRING", array=True),
        T("BIT", 3),
        T("VARBIT"),
        T("JSONB"),
        T("TIMESTAMPTZ"),
        T("DECIMAL", 10, 2),
        T("FLOAT"),
        T("UUID"),
        T("INET"),
        T("INTERVAL"),
        T("BYTES"),
    ]
    assert dogs.families == (
        ast.FamilyDef(I("f1"), (I("id"), I("name"))),
        ast.FamilyDef(
            I("f2"), tuple(I(n) for n in ["tags", "bits", "vb", "j", "t", "d", "f", "u", "ip", "iv", "b"])
        ),
    )
    assert sql[15] == ast.CreateTable(
        Q("x"),
        (
            ast.ColumnDef(I("a"), T("INT")),
            ast.ColumnDef(I("b"), T("INT"), computed=ast.BinaryOp("*", C("a"), L(2)), virtual=True),
            ast.ColumnDef(I("c"), T("INT8", array=True)),
        ),
        primary_key=ast.PrimaryKey((I("a"),)),
    )
    assert sql[16] == ast.CreateEnum(Q("status"), ("open", "closed"))


def test_sql_cockroach_dml(sql: list[ast.Statement]) -> None:
    assert sql[17] == ast.Insert(Q("foo"), (), ((L(1), L("Carl")),))
    assert sql[18] == ast.Insert(
        Q("office_dogs"),
        (),
        ((L(1), L("Petee")),),
        on_conflict_do_nothing=True,
        returning=(ast.SelectItem(C("id")),),
    )
    assert sql[19] == ast.Update(Q("foo"), ((I("name"), L("Petee")),), where=eq(C("id"), L(1)))
    assert sql[20] == ast.Delete(Q("office_dogs"), where=eq(C("name"), L("Petee")))
    assert sql[21] == ast.Select((ast.SelectItem(ast.Star()),), Q("foo"), as_of=L("-1s"))


def test_sql_expressions(sql: list[ast.Statement]) -> None:
    select = sql[22]
    assert isinstance(select, ast.Select) and select.table is None
    assert [i.expr for i in select.items] == [
        ast.Cast(L("1"), T("INT")),
        ast.Cast(L("2"), T("INT8")),
        ast.ArrayLit((L(1), L(2))),
        ast.BinaryOp("||", L("a"), L("b")),
        # 1 + 2 * 3 - -4 / 2 % 3  ==  (1 + (2 * 3)) - (((-4) / 2) % 3)
        ast.BinaryOp(
            "-",
            ast.BinaryOp("+", L(1), ast.BinaryOp("*", L(2), L(3))),
            ast.BinaryOp("%", ast.BinaryOp("/", L(-4), L(2)), L(3)),
        ),
    ]


def test_sql_transactions(sql: list[ast.Statement]) -> None:
    kinds = [type(s).__name__ for s in sql[23:30]]
    assert kinds == ["Begin", "Commit", "Rollback", "Begin", "Begin", "Commit", "Commit"]
    assert parse("abort; rollback transaction; begin work", "sql") == [
        ast.Rollback(),
        ast.Rollback(),
        ast.Begin(),
    ]


def test_sql_changefeeds(sql: list[ast.Statement]) -> None:
    assert sql[30] == ast.CreateChangefeed(
        (ast.ChangefeedTarget(Q("foo")),), L("kafka://localhost:9092"), (("updated", None),)
    )
    assert sql[31] == ast.CreateChangefeed(
        (ast.ChangefeedTarget(Q("foo")), ast.ChangefeedTarget(Q("bar"))),
        L("webhook-https://localhost:3000?insecure_tls_skip_verify=true"),
        (
            ("updated", None),
            ("resolved", L("10s")),
            ("format", L("json")),
            ("envelope", L("wrapped")),
            ("diff", None),
            ("mvcc_timestamp", None),
            ("min_checkpoint_frequency", L("1s")),
            ("schema_change_policy", L("backfill")),
            ("initial_scan", L("no")),
        ),
    )
    assert sql[32] == ast.CreateChangefeed((ast.ChangefeedTarget(Q("cdc_test")),), core=True)
    assert sql[33] == ast.CreateChangefeed(
        (ast.ChangefeedTarget(Q("cdc_test")),),
        options=(("format", L("avro")), ("confluent_schema_registry", L("http://localhost:8081"))),
        core=True,
    )
    assert sql[34] == ast.CreateChangefeed((ast.ChangefeedTarget(Q("cdc_test"), I("f1")),), core=True)
    assert sql[35] == ast.CreateChangefeed(
        (ast.ChangefeedTarget(Q("cdc_test")),), options=(("split_column_families", None),), core=True
    )
    assert sql[36] == ast.CreateChangefeed(
        (ast.ChangefeedTarget(Q("t")),),
        options=(
            ("cursor", L("1536242855577149065.0000000000")),
            ("end_time", L("1655402400000000000")),  # double-quoted option value: a string
            ("initial_scan_only", None),
            ("no_initial_scan", None),
        ),
        core=True,
    )


def test_sql_grants(sql: list[ast.Statement]) -> None:
    assert sql[37] == ast.Grant(("CHANGEFEED",), (Q("example_table"),), (I("user"),))
    assert sql[38] == ast.Grant(("SELECT", "CHANGEFEED"), (Q("a"), Q("b")), (I("alice"), I("bob")))
    assert sql[39] == ast.Grant(("CHANGEFEED",), (Q("a"),), (I("alice"),), revoke=True)
    assert sql[40] == ast.Grant(("CHANGEFEED",), (), (I("user"),))


def test_sql_users_databases_show(sql: list[ast.Statement]) -> None:
    assert sql[41] == ast.CreateUser(I("alice"))
    assert sql[42] == ast.CreateUser(I("bob"), True, (("controlchangefeed", None),))
    assert sql[43] == ast.CreateKeyspace(I("shop"), if_not_exists=True)
    assert sql[44] == ast.UseKeyspace(I("shop"))
    assert sql[45] == ast.DropTable(Q("foo"), if_exists=True)
    assert sql[46:] == [ast.Show("tables"), ast.Show("changefeed jobs"), ast.Show("create table", Q("foo"))]
    assert parse_one("CREATE USER u WITH PASSWORD 'x'", "sql") == ast.CreateUser(
        I("u"), options=(("password", L("x")),)
    )
    assert parse_one("SET DATABASE = shop", "sql") == ast.UseKeyspace(I("shop"))


def test_sql_view_is_rejected() -> None:
    with pytest.raises(StatementSyntaxError, match="unexpected 'VIEW'"):
        parse("SELECT * FROM `my table` VIEW x", "sql")


# --------------------------------------------------------------------------------------------------
# SQL literals, types and quoting


def test_sql_literals() -> None:
    exprs = items_of(
        "SELECT x'CAFE', b'ab', 3u, 4ut, 5l, 6s, 7t, 8us, 0x10, 1.5, 1e3, -2, +3, $1, ?, ?, "
        "date '2020-01-01', NULL, true, FALSE"
    )
    assert exprs == [
        L(b"\xca\xfe"),
        L(b"ab"),
        L(3, "u"),
        L(4, "ut"),
        L(5, "l"),
        L(6, "s"),
        L(7, "t"),
        L(8, "us"),
        L(16),
        L(Decimal("1.5")),
        L(1000.0),
        L(-2),
        L(3),
        ast.Param(0),
        ast.Param(0),
        ast.Param(1),
        ast.Cast(L("2020-01-01"), T("date")),
        L(None),
        L(True),
        L(False),
    ]
    assert isinstance(exprs[10], ast.Literal) and isinstance(exprs[10].value, float)


def test_sql_double_quotes() -> None:
    # identifiers in name positions; Column in expressions; strings in typed constructors
    stmt = parse_one('UPSERT INTO "T" ("a b") VALUES ("x", Utf8("a\\"b\\n"), "y"."z")', "sql")
    assert stmt == ast.Insert(
        ast.QName((I("T", True),)),
        (I("a b", True),),
        ((C("x", True), ast.FuncCall("Utf8", (L('a"b\n'),)), ast.Column(I("z", True), I("y", True))),),
        mode="upsert",
    )
    assert items_of('SELECT "it""s" AS "Alias"', "sql") == [C('it"s', True)]
    assert items_of("SELECT `a``b`", "sql") == [C("a`b", True)]


def test_sql_multiword_and_array_types() -> None:
    stmt = parse_one(
        "CREATE TABLE t (a DOUBLE PRECISION, b TIMESTAMP WITH TIME ZONE, c CHARACTER VARYING(10), "
        "d INT[], e STRING ARRAY, f TIME WITHOUT TIME ZONE, PRIMARY KEY (a))",
        "sql",
    )
    assert isinstance(stmt, ast.CreateTable)
    assert [c.type for c in stmt.columns] == [
        T("DOUBLE PRECISION"),
        T("TIMESTAMP WITH TIME ZONE"),
        T("CHARACTER VARYING", 10),
        T("INT", array=True),
        T("STRING", array=True),
        T("TIME WITHOUT TIME ZONE"),
    ]


def test_sql_operators() -> None:
    where = where_of(
        "SELECT * FROM t WHERE a <> 1 OR b != 2 AND c NOT BETWEEN 1 AND 2 AND d NOT IN (1) AND e::INT >= 3",
        "sql",
    )
    assert where == ast.BinaryOp(
        "OR",
        ast.BinaryOp("!=", C("a"), L(1)),
        and_(
            and_(
                and_(ast.BinaryOp("!=", C("b"), L(2)), ast.Between(C("c"), L(1), L(2), negated=True)),
                ast.InList(C("d"), (L(1),), negated=True),
            ),
            ast.BinaryOp(">=", ast.Cast(C("e"), T("INT")), L(3)),
        ),
    )
    # unary minus binds looser than ::, tighter than *
    assert items_of("SELECT -a::INT * 2", "sql") == [
        ast.BinaryOp("*", ast.UnaryOp("-", ast.Cast(C("a"), T("INT"))), L(2))
    ]
    assert items_of("SELECT t.a || 'x' = 'y'", "sql") == [
        eq(ast.BinaryOp("||", ast.Column(I("a"), I("t")), L("x")), L("y"))
    ]


# --------------------------------------------------------------------------------------------------
# Keywords, identifiers, comments, parameters, scripts

SOFT = ["key", "value", "name", "date", "payload", "status", "type", "user", "ts", "level", "text"]
SOFT += ["count", "time", "timestamp", "ttl", "tables", "jobs", "mode", "format", "zone"]


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_soft_keywords_as_identifiers(dialect: parser_mod.Dialect) -> None:
    cols = ", ".join(f"{c} int" for c in SOFT)
    create = parse_one(f"CREATE TABLE t ({cols}, PRIMARY KEY (key, value))", dialect)
    assert isinstance(create, ast.CreateTable)
    assert [c.name for c in create.columns] == [I(c) for c in SOFT]
    select = parse_one(
        f"SELECT {', '.join(SOFT)} FROM t WHERE key = 1 AND user = 2 AND timestamp > 3 ORDER BY time", dialect
    )
    assert isinstance(select, ast.Select)
    assert [i.expr for i in select.items] == [C(c) for c in SOFT]
    update = parse_one("UPDATE t SET type = 1, status = 2 WHERE key = 1", dialect)
    assert isinstance(update, ast.Update)
    assert [a[0] for a in update.assignments] == [I("type"), I("status")]
    insert = parse_one(f"INSERT INTO t ({', '.join(SOFT)}) VALUES ({', '.join(['1'] * len(SOFT))})", dialect)
    assert isinstance(insert, ast.Insert) and insert.columns == tuple(I(c) for c in SOFT)


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_keywords_are_case_insensitive(dialect: parser_mod.Dialect) -> None:
    a = parse_one("select A from T where B is not null and c in (1) order by a desc limit 1", dialect)
    b = parse_one("SELECT A FROM T WHERE B IS NOT NULL AND c IN (1) ORDER BY a DESC LIMIT 1", dialect)
    assert a == b
    assert isinstance(a, ast.Select) and a.items == (ast.SelectItem(C("A")),) and a.table == Q("T")


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_comments(dialect: parser_mod.Dialect) -> None:
    text = "-- leading\nSELECT /* inline ; */ a // trailing\nFROM t -- x ; y\n; /* multi\nline */"
    assert parse(text, dialect) == [ast.Select((ast.SelectItem(C("a")),), Q("t"))]


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_params_are_numbered_per_statement(dialect: parser_mod.Dialect) -> None:
    stmts = parse("UPDATE t SET a = ? WHERE k = ?; DELETE FROM t WHERE k = ? AND c = $2", dialect)
    assert isinstance(stmts[0], ast.Update) and isinstance(stmts[1], ast.Delete)
    assert stmts[0].assignments[0][1] == ast.Param(0)
    assert stmts[0].where == eq(C("k"), ast.Param(1))
    assert stmts[1].where == and_(eq(C("k"), ast.Param(0)), eq(C("c"), ast.Param(1)))


def test_batch_params_are_numbered_across_the_batch() -> None:
    batch = parse_one(
        "BEGIN BATCH INSERT INTO t (a) VALUES (?); UPDATE t SET a = ? WHERE k = ? APPLY BATCH", "cql"
    )
    assert isinstance(batch, ast.Batch)
    insert, update = batch.statements
    assert isinstance(insert, ast.Insert) and insert.rows == ((ast.Param(0),),)
    assert isinstance(update, ast.Update) and update.where == eq(C("k"), ast.Param(2))


def test_empty_statements_and_scripts() -> None:
    assert parse("", "sql") == []
    assert parse(" ;; -- nothing\n ; ", "cql") == []
    assert len(parse("SELECT 1;;SELECT 2;", "sql")) == 2
    assert parse_one("USE ks;", "cql") == ast.UseKeyspace(I("ks"))


def test_parse_one_requires_exactly_one_statement() -> None:
    with pytest.raises(StatementSyntaxError, match="expected a single statement, found 2") as e:
        parse_one("USE a;\n  USE b", "cql")
    assert (e.value.line, e.value.column) == (2, 3)
    with pytest.raises(StatementSyntaxError, match="empty statement"):
        parse_one("  -- only a comment", "sql")


def test_unknown_dialect() -> None:
    with pytest.raises(ValueError, match="unknown dialect"):
        parse("SELECT 1", "mysql")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Errors


def _error(text: str, dialect: parser_mod.Dialect) -> StatementSyntaxError:
    with pytest.raises(StatementSyntaxError) as info:
        parse(text, dialect)
    return info.value


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_error_misspelt_keyword(dialect: parser_mod.Dialect) -> None:
    e = _error("SELEC * FROM t", dialect)
    assert (e.line, e.column) == (1, 1)
    assert "unexpected 'SELEC', expected one of: " in str(e)
    assert "SELECT" in e.expected and "INSERT" in e.expected
    e = _error("SELECT * FROMM t", dialect)
    assert (e.line, e.column) == (1, 10)
    assert "unexpected 'FROMM', expected one of: " in str(e) and "FROM" in e.expected
    assert "__" not in str(e)


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_error_end_of_input(dialect: parser_mod.Dialect) -> None:
    e = _error("SELECT * FROM", dialect)
    assert (e.line, e.column) == (1, 14)
    # a subquery, FROM (SELECT ..), and CockroachDB's statement source, FROM [SHOW JOBS], are SQL only
    bracket = "'(', '[', " if dialect == "sql" else ""
    assert str(e) == (
        "syntax error at line 1, column 14: unexpected end of input, "
        f"expected one of: {bracket}identifier, quoted identifier"
    )


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_error_unclosed_column_list(dialect: parser_mod.Dialect) -> None:
    e = _error("INSERT INTO t (a VALUES (1)", dialect)
    assert (e.line, e.column) == (1, 18)
    # The sql dialect also takes Apache Phoenix's family-qualified names (B.vb) in column lists.
    tail = "')', ','" if dialect == "cql" else "')', ',', '.'"
    assert str(e).endswith(f"unexpected 'VALUES', expected one of: {tail}")
    assert e.expected == tuple(tail.split(", "))


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_error_update_without_assignment(dialect: parser_mod.Dialect) -> None:
    e = _error("UPDATE t SET WHERE", dialect)
    assert (e.line, e.column) == (1, 14)
    assert "unexpected 'WHERE', expected one of: identifier, quoted identifier" in str(e)


@pytest.mark.parametrize(
    ("text", "dialect", "column", "message"),
    [
        ("SELECT 'abc", "sql", 8, "unterminated string literal"),
        # 'it' is a complete string: the unterminated one is the 's that follows
        ("SELECT * FROM t WHERE a = 'it''s", "cql", 31, "unterminated string literal"),
        ('SELECT "abc FROM t', "cql", 8, "unterminated quoted identifier"),
        ('SELECT "abc FROM t', "sql", 8, "unterminated double-quoted string or identifier"),
        ("SELECT `abc FROM t", "sql", 8, "unterminated quoted identifier"),
        ("SELECT * FROM t /* never closed", "sql", 17, "unterminated comment"),
        ("SELECT # FROM t", "cql", 8, "unexpected character '#'"),
    ],
)
def test_error_lexical(text: str, dialect: parser_mod.Dialect, column: int, message: str) -> None:
    e = _error(text, dialect)
    assert (e.line, e.column) == (1, column)
    assert message in str(e)


@pytest.mark.parametrize("dialect", ["cql", "sql"])
def test_error_trailing_comma_in_create_table(dialect: parser_mod.Dialect) -> None:
    e = _error("CREATE TABLE t (a int,)", dialect)
    assert (e.line, e.column) == (1, 23)
    assert "unexpected ')', expected one of: " in str(e)
    assert "PRIMARY" in e.expected and "identifier" in e.expected


def test_error_multiline_positions() -> None:
    e = _error("SELECT *\nFROM t\nWHERE a = = 1", "cql")
    assert (e.line, e.column) == (3, 11)
    assert "unexpected '='" in str(e)
    e = _error("USE ks;\n\nUPDATE t\n   SET a = 1\n   WHER k = 1;", "cql")
    assert (e.line, e.column) == (5, 4)
    assert "unexpected 'WHER'" in str(e)
    e = _error("CREATE TABLE t (\n  a int,\n  b int\n", "sql")
    assert (e.line, e.column) == (3, 8)
    assert "unexpected end of input" in str(e)


@pytest.mark.parametrize(
    ("text", "dialect", "message"),
    [
        ("SELECT * FROM t WHERE x = 0xABC", "cql", "odd number of hex digits"),
        ("SELECT $0", "sql", "parameters are numbered from $1"),
        ("DELETE FROM t USING TTL 1 WHERE k = 1", "cql", "DELETE does not accept USING TTL"),
        ("CREATE TABLE t (a int, PRIMARY KEY (a), PRIMARY KEY (a))", "cql", "more than one PRIMARY KEY"),
        ("UPDATE t SET a = 1 WHERE k = 1 IF a = 2", "cql", "unexpected 'a'"),
    ],
)
def test_error_rejected_constructs(text: str, dialect: parser_mod.Dialect, message: str) -> None:
    assert message in str(_error(text, dialect))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("CREATE TABLE t (a INT UNIQUE)", "UNIQUE constraints are not supported"),
        ("CREATE TABLE t (a INT, CONSTRAINT u UNIQUE (a))", "UNIQUE constraints are not supported"),
        ("CREATE TABLE t (a INT CHECK (a > 0))", "CHECK constraints are not supported"),
        ("CREATE TABLE t (a INT, b INT REFERENCES s (id))", "foreign keys are not supported"),
        ("CREATE TABLE t (a INT, FOREIGN KEY (a) REFERENCES s)", "foreign keys are not supported"),
        ("CREATE UNIQUE INDEX IF NOT EXISTS i ON t (a, b)", "secondary indexes are not supported"),
    ],
)
def test_constraints_and_indexes_are_refused_by_name(text: str, message: str) -> None:
    """What the store cannot keep is named in the error (0A000), not reported as a typo."""
    with pytest.raises(UnsupportedFeature) as err:
        parse(text, "sql")
    assert message in str(err.value) and err.value.code == "0A000"


def test_errors_never_leak_lark_names() -> None:
    for text in ["SELECT (1", "CREATE", "INSERT INTO t VALUES", "GRANT ON", "ALTER TABLE t ADD", ")"]:
        e = _error(text, "sql")
        assert "__" not in str(e) and "ANON" not in str(e), str(e)


# --------------------------------------------------------------------------------------------------
# Cache


def test_parse_uses_the_cache() -> None:
    text = "SELECT * FROM cache_probe WHERE k = ?"
    before = parser_mod.cache_info()
    first = parse(text, "cql")
    second = parse(text, "cql")
    after = parser_mod.cache_info()
    assert after.hits >= before.hits + 1
    assert first == second and first is not second  # callers get their own list
    assert first[0] is second[0]  # ... of the same (immutable) statements
    one = parse_one(text, "cql")
    assert one is first[0]
    # the dialect is part of the key
    assert parse("SELECT 1", "sql") != [] and parser_mod.cache_info().currsize >= 2


# --------------------------------------------------------------------------------------------------
# The tree builder's rule families


def test_each_rule_is_in_one_family() -> None:
    """The builder's rule families (the mixins of ``TreeBuilder``) define each rule once: a rule in
    two families would silently be taken from whichever comes first in the method order."""
    from changefeed.sql.builder import FAMILIES, TreeBuilder

    assert TreeBuilder.__bases__ == FAMILIES
    owner: dict[str, str] = {}
    twice: list[str] = []
    for family in FAMILIES:
        for name in vars(family):
            if name.startswith("_"):
                continue
            if name in owner:
                twice.append(f"{name}: {owner[name]} and {family.__name__}")
            owner[name] = family.__name__
    assert twice == []
