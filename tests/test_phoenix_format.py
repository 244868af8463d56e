"""Apache Phoenix CDC pieces that need no database: the JSON Phoenix writes (Java HashMap key
order, Java number and date spellings), TO_DATE/TO_TIMESTAMP, and the Phoenix statement forms."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import orjson
import pytest

from changefeed.engine.phoenix_types import resolve_phoenix_type
from changefeed.exceptions import PhoenixIllegalData, StatementSyntaxError
from changefeed.formats import phoenix_json as pj
from changefeed.sql import ast
from changefeed.sql.parser import parse, parse_one
from changefeed.sql.phoenix_functions import FUNCTIONS, parse_date


# ---------------------------------------------------------------------------------- key order
def test_java_string_hash() -> None:
    assert pj.java_string_hash("V1") == 2715
    assert pj.java_string_hash("event_type") == 984376767  # "event_type".hashCode() on the JDK


def test_hashmap_orders_from_the_reference() -> None:
    # JDK-verified orders (reference §2, "Key order").
    assert pj.java_hashmap_order(["V1", "V2", "V3", "B.VB"]) == ["B.VB", "V1", "V2", "V3"]
    all4 = ["pre_image", "change_image", "post_image", "event_type"]
    assert pj.java_hashmap_order(all4) == ["change_image", "post_image", "event_type", "pre_image"]
    assert pj.java_hashmap_order(["pre_image", "post_image", "event_type"]) == [
        "post_image",
        "event_type",
        "pre_image",
    ]
    assert pj.java_hashmap_order(["change_image", "event_type"]) == ["change_image", "event_type"]
    assert pj.java_hashmap_order(["pre_image", "event_type"]) == ["event_type", "pre_image"]


def test_post_image_is_presized_by_put_all() -> None:
    # new HashMap<>().putAll(change) sizes its table for the entries: 2 entries -> capacity 4.
    ev = pj.build_event(pj.UPSERT, None, [("V1", 200), ("V2", 2000)], frozenset({"POST"}))
    assert pj.dumps(ev) == '{"post_image":{"V2":2000,"V1":200},"event_type":"upsert"}'


@pytest.mark.parametrize(
    ("scopes", "upsert", "delete"),
    [
        ((), '{"event_type":"upsert"}', '{"event_type":"delete"}'),
        (("CHANGE",), '{"change_image":{"V1":2},"event_type":"upsert"}', '{"event_type":"delete"}'),
        (
            ("PRE",),
            '{"event_type":"upsert","pre_image":{"V1":1}}',
            '{"event_type":"delete","pre_image":{"V1":1}}',
        ),
        (("POST",), '{"post_image":{"V1":2},"event_type":"upsert"}', '{"event_type":"delete"}'),
        (
            ("PRE", "POST", "CHANGE"),
            '{"change_image":{"V1":2},"post_image":{"V1":2},"event_type":"upsert","pre_image":{"V1":1}}',
            '{"event_type":"delete","pre_image":{"V1":1}}',
        ),
    ],
)
def test_scope_matrix(scopes: tuple[str, ...], upsert: str, delete: str) -> None:
    s = frozenset(scopes)
    assert pj.dumps(pj.build_event(pj.UPSERT, [("V1", 1)], [("V1", 2)], s)) == upsert
    assert pj.dumps(pj.build_event(pj.DELETE, [("V1", 1)], [], s)) == delete
    ttl = pj.dumps(pj.build_event(pj.TTL_DELETE, [("V1", 1)], [], s))
    assert orjson.loads(ttl) == {
        "event_type": "ttl_delete",
        **({"pre_image": {"V1": 1}} if "PRE" in s else {}),
    }


def test_parse_scopes() -> None:
    assert pj.parse_scopes(["pre", " Post ", "PRE", ""]) == {"PRE", "POST"}
    with pytest.raises(ValueError, match="ABC"):
        pj.parse_scopes(["abc"])


# ---------------------------------------------------------------------------------- values
@pytest.mark.parametrize(
    ("x", "text"),
    [(1.5, "1.5"), (1e10, "1.0E10"), (100.0, "100.0"), (0.001, "0.001"), (0.0001, "1.0E-4"), (1e7, "1.0E7"),
     (9999999.0, "9999999.0"), (-2.5, "-2.5"), (123456789.0, "1.23456789E8"), (0.0, "0.0")],
)  # fmt: skip
def test_java_double(x: float, text: str) -> None:
    assert pj.java_double(x) == text


def test_values_as_phoenix_renders_them() -> None:
    def r(v: object, t: str, *params: int, array: bool = False) -> str:
        return pj.dumps(pj.render_value(v, resolve_phoenix_type(t, params, array)))

    ts = dt.datetime(2024, 5, 28, 9, 55, 30, 123000)
    assert r(100, "INTEGER") == "100"
    assert r(True, "BOOLEAN") == "true"
    assert r(0.1, "FLOAT") == "0.1"
    assert r(Decimal("12.50"), "DECIMAL", 10, 2) == "12.5"
    assert r(Decimal("1000"), "DECIMAL") == "1E+3"
    assert r("ab   ", "CHAR", 5) == '"ab"'
    assert r(ts, "DATE") == '"2024-05-28"'
    assert r(ts, "TIME") == '"09:55:30"'
    assert r(ts, "TIMESTAMP") == '"2024-05-28 09:55:30.123"'
    assert r(ts.replace(microsecond=0), "TIMESTAMP") == '"2024-05-28 09:55:30.0"'
    assert r(b"\x01\x02\x03\xff", "VARBINARY") == '"AQID/w=="'
    assert r([1, 2, 3], "INTEGER", array=True) == '"[1, 2, 3]"'
    assert r(["a", "b"], "VARCHAR", array=True) == "\"['a', 'b']\""
    assert r(None, "INTEGER") == "null"
    assert pj.dumps('a"b\n') == '"a\\"b\\n"'


# ---------------------------------------------------------------------------------- TO_DATE
def test_to_date_default_format_is_lenient_iso_in_gmt() -> None:
    want = dt.datetime(2024, 5, 28, 9, 55, 30, 123000)
    assert FUNCTIONS["to_date"]("2024-05-28 09:55:30.123") == want
    assert FUNCTIONS["to_date"]("2024-05-28T09:55:30.123Z") == want
    assert FUNCTIONS["to_date"]("2024-05-28T11:55:30.123+02:00") == want
    assert FUNCTIONS["to_date"]("2024-05-28") == dt.datetime(2024, 5, 28)
    assert FUNCTIONS["to_date"]("28/05/2024 09:55", "dd/MM/yyyy HH:mm") == dt.datetime(2024, 5, 28, 9, 55)
    assert FUNCTIONS["to_date"]("2024-05-28 11:55:30.123", None, "Europe/Berlin") == want
    assert FUNCTIONS["to_date"](None) is None
    assert parse_date("2024-05-28 09:55:30.123456") == dt.datetime(2024, 5, 28, 9, 55, 30, 123456)
    assert FUNCTIONS["to_date"]("2024-05-28 09:55:30.123456").microsecond == 123000  # DATE: ms


@pytest.mark.parametrize("bad", ["yesterday", "2024-13-01", "2024-05-28 25:00", "20240528"])
def test_malformed_to_date_is_phoenix_illegal_data(bad: str) -> None:
    with pytest.raises(PhoenixIllegalData) as info:
        FUNCTIONS["to_date"](bad)
    assert info.value.code == "22000"
    assert str(info.value).startswith("ERROR 201 (22000): Illegal data.")


# ---------------------------------------------------------------------------------- grammar
@pytest.mark.parametrize(
    "text",
    [
        "create cdc foo on bar",
        "create cdc foo on s.bar",
        "create cdc if not exists foo on bar",
        "create cdc foo on bar TTL=100",
        "create cdc foo on bar include (pre, post, change)",
        "create cdc if not exists foo on bar abc=def, prop=val",
        "CREATE CDC C ON T INCLUDE (PRE) SALT_BUCKETS = 4",
        "drop cdc foo on bar",
        "drop cdc if exists foo on s.bar",
    ],
)
def test_phoenix_parser_accepts(text: str) -> None:  # QueryParserTest's valid forms
    assert isinstance(parse_one(text, "sql"), ast.CreateCdc | ast.DropCdc)


@pytest.mark.parametrize(
    "text",
    [
        "create cdc foo",
        "create cdc foo bar",
        "create cdc s.foo on bar(ts)",
        "drop cdc foo bar",
        "drop cdc s.foo on bar",
        "drop cdc foo on bar(ts)",
        "alter cdc foo on bar",
    ],
)
def test_phoenix_parser_rejects(text: str) -> None:  # QueryParserTest's invalid forms; no ALTER CDC
    with pytest.raises(StatementSyntaxError):
        parse(text, "sql")


def test_phoenix_create_table_forms() -> None:
    t = parse_one(
        "CREATE TABLE T (k INTEGER NOT NULL, v1 INTEGER, B.vb INTEGER, CONSTRAINT PK PRIMARY KEY (k))", "sql"
    )
    assert isinstance(t, ast.PhoenixCreateTable)
    assert t.table.columns[2].family == ast.Ident("B")
    t = parse_one(
        "CREATE TABLE T ( k VARCHAR NOT NULL, v1 VARCHAR, v2 BIGINT CONSTRAINT PK PRIMARY KEY(k))"
        ' "phoenix.max.lookback.age.seconds"=97200,TTL=100, IS_STRICT_TTL=false',
        "sql",
    )
    assert isinstance(t, ast.PhoenixCreateTable)
    assert [p.name.name for p in t.properties] == ["phoenix.max.lookback.age.seconds", "TTL", "IS_STRICT_TTL"]
    assert isinstance(
        parse_one("CREATE IMMUTABLE TABLE T (k INTEGER PRIMARY KEY, v VARCHAR ARRAY)", "sql"),
        ast.PhoenixCreateTable,
    )
    assert isinstance(parse_one("CREATE TABLE t (k TINYINT PRIMARY KEY)", "sql"), ast.PhoenixCreateTable)
    # No Phoenix-only syntax: an ordinary (YDB/CockroachDB) table, names as written.
    assert isinstance(parse_one("CREATE TABLE t (k INT PRIMARY KEY, v INT FAMILY f)", "sql"), ast.CreateTable)
    a = parse_one('ALTER TABLE T SET "phoenix.max.lookback.age.seconds"=50', "sql")
    assert isinstance(a, ast.AlterTable) and isinstance(a.actions[0], ast.PhoenixSetProperties)
    u = parse_one("UPSERT INTO T (K, B.VB) SELECT k, v FROM S", "sql")
    assert isinstance(u, ast.UpsertSelect) and u.columns == (ast.Ident("K"), ast.Ident("VB"))
    h = parse_one("SELECT /*+ CDC_INCLUDE(PRE, POST) */ * FROM C", "sql")
    assert isinstance(h, ast.HintedSelect) and h.hint == "CDC_INCLUDE(PRE, POST)"
    assert isinstance(parse_one("SELECT /* a comment */ * FROM C", "sql"), ast.Select)
